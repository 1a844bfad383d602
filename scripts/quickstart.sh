#!/usr/bin/env bash
# The README's quickstart, runnable: a new user signs up (on a fresh
# embedded install the first account is the system administrator), creates
# an organization, invites a colleague (role by name) and reads the
# invitation e-mail from the outbox; the colleague accepts it under a
# profile of his own; then a model answers, a knowledge base is built from
# a folder and asked, and a chat uses it.
#
# Needs: a running server on a fresh data directory (WORKSPACE_URL, default
# http://127.0.0.1:8080; `cargo run -p workspace-server`), the CLI on PATH
# (`cargo install --path cli --locked`), and a writable current directory (the
# commands create ./notes). The lines between the markers are the README's
# quickstart block, character for character: the test suite checks that
# (cli/tests/cli.rs, `the_readme_quickstart_is_the_script`) and runs this
# script against a real server (`quickstart_script_runs`), so neither can
# drift from the CLI.
set -euo pipefail

# quickstart: begin
export WORKSPACE_PASSWORD='correct horse battery'
workspace auth signup --email ada@example.com --first-name Ada --last-name Lovelace \
    --password "$WORKSPACE_PASSWORD"
workspace auth login --email ada@example.com
workspace me

ORG=$(workspace org create --name "Acme" -q)
INVITE=$(workspace invitations create --org-id "$ORG" --email bob@example.com --role member | jq -r .token)
workspace system outbox --limit 1
workspace auth signup-invite --profile bob --invite-token="$INVITE" --first-name Bob --last-name Byte \
    --password "$WORKSPACE_PASSWORD"
workspace me --profile bob
workspace users list --org-id "$ORG" --format table

MODEL=$(workspace models list --org-id "$ORG" | jq -r '.[0].id')
CONV=$(workspace conversation create --org-id "$ORG" --title "First" -q)
SESSION=$(workspace conversation create-session --org-id "$ORG" --conversation-id "$CONV" --model-id "$MODEL" -q)
workspace conversation chat --org-id "$ORG" --chat-session-id "$SESSION" --message "Hello"
workspace conversation messages --org-id "$ORG" --conversation-id "$CONV" --format table

mkdir -p notes
echo "The keeper climbs the lighthouse stairs every evening to light the lamp." > notes/lighthouse.txt
echo "Sourdough loaves sell out every Saturday morning." > notes/bakery.txt
KB=$(workspace kb create --org-id "$ORG" --name "Notes" --from ./notes -q)
workspace kb search --kb-id "$KB" "who lights the lamp?"
workspace kb query --kb-id "$KB" "Who lights the lamp?"
workspace chat send --org-id "$ORG" --kb "$KB" "When does the bread sell out?"
# quickstart: end
echo "quickstart done"
