"""A webhook receiver for the webhooks tests, verifying every delivery with
the official Standard Webhooks library (PyPI `standardwebhooks`, pinned in
xtask), unmodified.

    python webhook_receiver.py SECRETS_FILE LOG_FILE

Listens on 127.0.0.1 (a free port, printed as the first line of stdout).
SECRETS_FILE holds one `whsec_...` secret per line (re-read at every
request); each request is verified with each of them (`Webhook(secret)
.verify(body, headers)`), and the log says which verified. LOG_FILE gets one
JSON line when a request arrives (`"stage": "received"`) and one after the
answer was written (`"stage": "answered"`, with its status).

The path chooses the behaviour:
- `/ok`: 200 (when at least one secret verifies; else 401).
- `/flaky`: 500 at the first attempt of each `webhook-id`, then 200.
- `/fail`: always 500.
- `/slow`: waits 30 s before answering 200 (the sender times out first).
- `/huge`: 200 with a 1 GiB body (declared), written until the sender hangs up.
- `/trickle`: 200 at once, then one byte a second, for ever.
- `/hang-third`: 200, except the first attempt of the third distinct
  `webhook-id`, which waits 20 s and answers 503 (the sender is killed
  meanwhile).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

SECRETS_FILE, LOG_FILE = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()
SEEN = {}  # webhook-id -> attempts seen
ORDER = []  # distinct webhook-ids in arrival order


def log(entry):
    with LOCK:
        with open(LOG_FILE, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        headers = {k: v for k, v in self.headers.items()}
        with open(SECRETS_FILE) as f:
            secrets = [line.strip() for line in f if line.strip()]
        verified = []
        payload = None
        for i, secret in enumerate(secrets):
            try:
                payload = Webhook(secret).verify(body, headers)
                verified.append(i)
            except Exception:
                pass
        msg_id = headers.get("webhook-id") or headers.get("Webhook-Id")
        with LOCK:
            SEEN[msg_id] = SEEN.get(msg_id, 0) + 1
            attempt = SEEN[msg_id]
            if attempt == 1:
                ORDER.append(msg_id)
            position = ORDER.index(msg_id) + 1
        entry = {
            "path": self.path,
            "webhook_id": msg_id,
            "attempt": attempt,
            "verified": verified,
            "signatures": len((headers.get("webhook-signature") or "").split(" ")),
            "payload": payload,
            "at": time.time(),
        }
        log(dict(entry, stage="received"))
        status, extra = 200, b"ok"
        if not verified:
            status = 401
        elif self.path == "/flaky" and attempt == 1:
            status = 500
        elif self.path == "/fail":
            status = 500
        elif self.path == "/slow":
            time.sleep(30)
        elif self.path == "/hang-third" and position == 3 and attempt == 1:
            time.sleep(20)
            status = 503
        try:
            if self.path == "/huge" and status == 200:
                self.send_response(200)
                self.send_header("content-length", str(1 << 30))
                self.end_headers()
                chunk = b"x" * 65536
                for _ in range((1 << 30) // 65536):
                    self.wfile.write(chunk)
            elif self.path == "/trickle" and status == 200:
                self.send_response(200)
                self.send_header("content-length", str(1 << 20))
                self.end_headers()
                self.wfile.flush()
                for _ in range(1 << 20):
                    self.wfile.write(b"y")
                    self.wfile.flush()
                    time.sleep(1)
            else:
                self.send_response(status)
                self.send_header("content-length", str(len(extra)))
                self.end_headers()
                self.wfile.write(extra)
                self.wfile.flush()
                log(dict(entry, stage="answered", status=status))
        except (BrokenPipeError, ConnectionResetError):
            pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
