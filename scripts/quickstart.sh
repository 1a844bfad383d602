#!/usr/bin/env bash
# The README's quickstart, runnable: a new user signs up, creates an
# organization, invites a colleague, talks to a model, builds a knowledge
# base from a folder and asks it, then chats with it.
#
# Needs: a running server (WORKSPACE_URL, default http://127.0.0.1:8080;
# start one with `cargo run -p workspace-server`), the CLI on PATH
# (`cargo install --path cli`), and jq. The test suite runs this script
# against a real server (cli/tests/cli.rs, `quickstart_script_runs`), so it
# cannot drift from the CLI.
set -euo pipefail

EMAIL=${QUICKSTART_EMAIL:-ada-$(date +%s)-$RANDOM@example.com}
export WORKSPACE_PASSWORD=${QUICKSTART_PASSWORD:-'correct horse battery'}

# Sign up and log in (the token is saved in the CLI's profile).
workspace auth signup --email "$EMAIL" --first-name Ada --last-name Lovelace \
    --password "$WORKSPACE_PASSWORD" > /dev/null
workspace auth login --email "$EMAIL" > /dev/null
workspace me | jq -r '"logged in as \(.email)"'

# An organization, and an invitation with its member role. Without SMTP the
# e-mail lands in the email_outbox table (see README, E-mail).
ORG=$(workspace org create --name "Acme" -q)
ROLE=$(workspace roles list-roles --org-id "$ORG" | jq -r '.[] | select(.name == "member") | .id')
workspace invitations create --org-id "$ORG" --email "bob-$RANDOM@example.com" \
    --role-id "$ROLE" | jq -r '"invited \(.email)"'
workspace users list --org-id "$ORG" --format table
# The invitation e-mail, from the outbox (system administrators: start the
# server with WORKSPACE_SYSTEM_ADMINS=<your e-mail>).
workspace system outbox --limit 1 | jq -r '.emails[0] | "outbox: \(.subject) -> \(.to_address)"' \
    || echo "(start the server with WORKSPACE_SYSTEM_ADMINS=$EMAIL to read the outbox)"

# A conversation with a model (with no provider configured: the built-in
# offline development model).
MODEL=$(workspace models list --org-id "$ORG" | jq -r '.[0].id')
CONV=$(workspace conversation create --org-id "$ORG" --title "First" -q)
SESSION=$(workspace conversation create-session --org-id "$ORG" \
    --conversation-id "$CONV" --model-id "$MODEL" -q)
workspace conversation chat --org-id "$ORG" --chat-session-id "$SESSION" --message "Hello"
workspace conversation messages --org-id "$ORG" --conversation-id "$CONV" --format table

# A knowledge base from a folder: uploaded, ingested with the local
# embedder, searched and asked.
NOTES=$(mktemp -d)
trap 'rm -rf "$NOTES"' EXIT
echo "The keeper climbs the lighthouse stairs every evening to light the lamp." > "$NOTES/lighthouse.txt"
echo "Sourdough loaves sell out every Saturday morning." > "$NOTES/bakery.txt"
KB=$(workspace kb create --org-id "$ORG" --name "Notes" --from "$NOTES" -q)
workspace kb search --kb-id "$KB" "who lights the lamp?"
workspace kb query --kb-id "$KB" "Who lights the lamp?"

# A chat that retrieves from the knowledge base (ids go to stderr).
workspace chat send --org-id "$ORG" --kb "$KB" "When does the bread sell out?"
echo "quickstart done"
