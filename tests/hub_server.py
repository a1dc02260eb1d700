"""A local stand-in for the Hugging Face Hub: a real HTTP server on 127.0.0.1 in a thread, serving the
URLs huggingface_hub requests (``HF_ENDPOINT``): ``HEAD``/``GET {repo}/resolve/{revision}/{file}`` with
the Hub's headers (``X-Repo-Commit``, ``ETag``), ``GET /api/models/{repo}/revision/{revision}`` (the file
list ``snapshot_download`` reads), and the Hub's error codes (``GatedRepo``, ``EntryNotFound``,
``RepoNotFound``) in ``X-Error-Code``. Every request is logged, so a test can say what was asked."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    gated: bool = False


@dataclass
class FakeHub:
    repos: dict[str, FakeRepo]
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - the http.server spelling
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _error(self, status: int, code: str, message: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                payload = json.dumps({"error": message}).encode()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(payload)

            def _json(self, value, body: bool) -> None:
                payload = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _answer(self, body: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path))
                if path.startswith("/api/models/") and "/tree/" in path:
                    repo_id, _ = path[len("/api/models/"):].split("/tree/", 1)
                    repo = hub.repos.get(repo_id)
                    if repo is None:
                        return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
                    if repo.gated:
                        return self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted")
                    entries = [{"type": "file", "path": name, "size": len(data),
                                "oid": hashlib.sha1(data).hexdigest()} for name, data in sorted(repo.files.items())]
                    return self._json(entries, body)
                if path.startswith("/api/models/") and "/revision/" in path:
                    repo_id, revision = path[len("/api/models/"):].split("/revision/", 1)
                    repo = hub.repos.get(repo_id)
                    if repo is None:
                        return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
                    if repo.gated:
                        return self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted")
                    return self._json({"id": repo_id, "sha": repo.commit,
                                       "siblings": [{"rfilename": name} for name in sorted(repo.files)]}, body)
                if "/resolve/" not in path:
                    return self._error(404, "RepoNotFound", f"no route {path}")
                repo_id, rest = path.lstrip("/").split("/resolve/", 1)
                revision, _, filename = rest.partition("/")
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
                if repo.gated:
                    return self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted")
                if revision not in ("main", repo.commit):
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                if filename not in repo.files:
                    return self._error(404, "EntryNotFound", f"{filename} does not exist in {repo_id}")
                data = repo.files[filename]
                self.send_response(200)
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if body:
                    self.wfile.write(data)
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@dataclass
class HangUp:
    """A TCP port where nothing speaks HTTP: every connection is accepted, counted and closed at once, as
    a firewall or a dead proxy does. ``connections`` says how often a client tried."""

    connections: int = 0
    url: str = ""

    def __enter__(self) -> HangUp:
        import socket

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._stop = threading.Event()

        def serve() -> None:
            while not self._stop.is_set():
                try:
                    connection, _ = self._socket.accept()
                except OSError:
                    continue
                self.connections += 1
                connection.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


def closed_port_url() -> str:
    """The address of a local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"
