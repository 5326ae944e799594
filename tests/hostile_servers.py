"""HTTP servers that a results folder or a user may point orch's MLflow tracker at, each a real server on
loopback (emulated, not mocked: orch's MLflow client talks HTTP to them as to any tracking server):

- `RecordingServer`: answers every request and keeps what it was sent (a folder's stored URI must get nothing,
  least of all the user's MLflow token);
- `DripServer`: answers every request one byte of a header every few seconds, for ever (a socket timeout never
  fires: only a bound of orch's own ends the wait);
- `EndlessPagesServer`: enough of MLflow's REST API for orch's tracker to open a sweep's parent run, then a run
  search that hands out a new page token on every page, for ever.

Each runs in a daemon thread of the test process (`with Server() as server: server.uri`).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse


class _Server:
    handler: type[BaseHTTPRequestHandler]

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []   # (method, path, headers)
        self.stopping = threading.Event()
        owner = self

        class Handler(self.handler):   # type: ignore[name-defined,misc]
            server_owner = owner

            def log_message(self, *args):   # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class _Recording(BaseHTTPRequestHandler):
    def _any(self) -> None:
        self.server_owner.requests.append((self.command, self.path, dict(self.headers)))
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any


class RecordingServer(_Server):
    handler = _Recording


class _Drip(BaseHTTPRequestHandler):
    DRIP_S = 2.0

    def _any(self) -> None:
        self.server_owner.requests.append((self.command, self.path, dict(self.headers)))
        try:   # one header whose value never ends: a client's header count and line bounds take a day to trip
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Still-Here: ")
            while not self.server_owner.stopping.is_set():
                self.wfile.write(b"y")
                self.wfile.flush()
                time.sleep(self.DRIP_S)
        except OSError:
            pass

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any


class DripServer(_Server):
    handler = _Drip


def _run(run_id: str, artifacts: str, status: str = "RUNNING") -> dict:
    return {"info": {"run_id": run_id, "run_uuid": run_id, "experiment_id": "1", "run_name": "sweep",
                     "status": status, "start_time": 1, "artifact_uri": f"{artifacts}/{run_id}",
                     "lifecycle_stage": "active", "user_id": "orch"},
            "data": {"params": [], "metrics": [], "tags": [{"key": "orch.role", "value": "sweep"}]}}


class _Mlflow(BaseHTTPRequestHandler):
    def _json(self, data: dict, code: int = 200) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def do_GET(self) -> None:
        owner = self.server_owner
        owner.requests.append(("GET", self.path, dict(self.headers)))
        url = urlparse(self.path)
        if url.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")
        elif url.path.endswith("/experiments/get-by-name"):
            name = parse_qs(url.query).get("experiment_name", ["x"])[0]
            self._json({"experiment": {"experiment_id": "1", "name": name, "artifact_location": owner.artifacts,
                                       "lifecycle_stage": "active"}})
        elif url.path.endswith("/runs/get"):
            self._json({"run": _run("parent", owner.artifacts)})
        else:
            self._json({})

    def do_POST(self) -> None:
        owner = self.server_owner
        owner.requests.append(("POST", self.path, dict(self.headers)))
        body = self._body()
        if self.path.endswith("/runs/search"):
            if int(body.get("max_results") or 0) == 1:   # the parent's search: found
                self._json({"runs": [_run("parent", owner.artifacts)]})
                return
            owner.pages += 1
            self._json({"runs": [], "next_page_token": f"page-{owner.pages}"})   # for ever, a new token each time
        elif self.path.endswith("/runs/update"):
            self._json({"run_info": _run("parent", owner.artifacts)["info"]})
        else:
            self._json({})


class EndlessPagesServer(_Server):
    handler = _Mlflow

    def __init__(self, artifacts: Path) -> None:
        super().__init__()
        self.artifacts = artifacts.as_uri()
        self.pages = 0
