#!/usr/bin/env bash
# The README's admin story: an owner or admin of ORG logs in once and makes
# a service account; everything after runs with that account's token only
# (WORKSPACE_TOKEN=wsp_…, no password). The test suite runs it against a
# real server (cli/tests/cli.rs) and checks that the README's block is this
# script's. Needs ADMIN_EMAIL, WORKSPACE_PASSWORD (or a prompt), ORG, jq.
set -euo pipefail
: "${ADMIN_EMAIL:?an owner or admin of the organization}"
: "${ORG:?the organization}"

# admin: begin
workspace auth login --email "$ADMIN_EMAIL"
WORKSPACE_TOKEN=$(workspace org service-accounts-create --org-id "$ORG" --name admin-bot --role admin \
    --scope 'users:*' --scope roles:read --scope 'kb:*' --scope chats:write | jq -r .token.token)
export WORKSPACE_TOKEN
workspace me
workspace users list --org-id "$ORG" --format table
workspace roles list --org-id "$ORG" --format table
workspace invitations create --org-id "$ORG" --email carol@example.com --role member
workspace invitations list --org-id "$ORG"
mkdir -p handbook
echo "Expenses are filed by the fifth of each month." > handbook/expenses.txt
KB=$(workspace kb create --org-id "$ORG" --name "Handbook" --from ./handbook -q)
workspace kb search --kb-id "$KB" "when are expenses filed?"
workspace org service-accounts-list --org-id "$ORG"
# admin: end
