"""A faulty network in front of the real S3 test server: a localhost HTTP proxy that forwards every
request to moto, except those its rule picks, which it answers ``503 SlowDown``, drops (the connection
closed with no answer, the request never sent on), loses (the request sent on, the connection closed
with no answer: the client cannot tell whether it happened), or cuts (the answer's headers and half its
body, then the connection closed).

A real server on a real socket, started and stopped by the test: the client library (s3fs, botocore)
meets the fault exactly as it would meet a throttling or flaky endpoint; nothing in it is patched.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message><RequestId>crs-fault-proxy</RequestId></Error>")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "upgrade", "te"}

Rule = Callable[[int, str, str], str | None]
"""(request number from 1, method, path) -> None (forward), "slowdown", "drop", "lose" or "cut"."""


class FaultProxy:
    """``with FaultProxy(upstream, rule) as proxy:`` serves on ``proxy.url``; ``proxy.faults`` counts what it did."""

    def __init__(self, upstream: str, rule: Rule):
        self.upstream = urlsplit(upstream)
        self.rule = rule
        self.requests = 0
        self.faults: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def decide(self, method: str, path: str) -> str | None:
        with self._lock:
            self.requests += 1
            action = self.rule(self.requests, method, path)
            if action is not None:
                self.faults[action] = self.faults.get(action, 0) + 1
            return action


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet: the tests read their own output
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _handle(self) -> None:
            body = self._body()
            action = proxy.decide(self.command, self.path)
            if action == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if action == "slowdown":
                self.send_response_only(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(SLOWDOWN)
                return
            upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                headers["Content-Length"] = str(len(body))
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
            finally:
                upstream.close()
            if action == "lose":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response_only(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in HOP_BY_HOP and (key.lower() != "content-length" or self.command == "HEAD"):
                    self.send_header(key, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if action == "cut" and len(data) > 1:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler
