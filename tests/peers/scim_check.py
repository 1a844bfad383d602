"""Runs the SCIM compliance checker (scim2-tester, unmodified) against a
server's SCIM service and prints one JSON line per check result, then a
summary line. Usage: scim_check.py <base_url> <token>

The Rust test (tests/tests/integration/scim.rs) reads the lines and fails
on any result the checker classes as a violation (ERROR or CRITICAL)."""

import json
import sys

from httpx2 import Client
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server


def main() -> None:
    base_url, token = sys.argv[1], sys.argv[2]
    http = Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    client = SyncSCIMClient(http)
    results = check_server(client)
    counts: dict[str, int] = {}
    for result in results:
        status = result.status.name
        counts[status] = counts.get(status, 0) + 1
        print(
            json.dumps(
                {
                    "status": status,
                    "title": result.title,
                    "resource_type": result.resource_type,
                    "reason": (result.reason or "")[:2000],
                    # What the checker saw, for a failure's diagnosis.
                    "data": repr(result.data)[:3000]
                    if result.status in (Status.ERROR, Status.CRITICAL)
                    else None,
                }
            ),
            flush=True,
        )
    bad = sum(
        1 for r in results if r.status in (Status.ERROR, Status.CRITICAL)
    )
    print(json.dumps({"summary": counts, "violations": bad}), flush=True)


if __name__ == "__main__":
    main()
