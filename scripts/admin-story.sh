#!/usr/bin/env bash
# The README's admin story: an organization administered with a service
# account's token only (WORKSPACE_TOKEN=wsp_…, ORG its organization): no
# password anywhere. The test suite runs it against a real server
# (cli/tests/cli.rs) and checks that the README's block is this script's.
set -euo pipefail
: "${WORKSPACE_TOKEN:?the service account's token}"
: "${ORG:?the service account's organization}"

# admin: begin
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
