"""A real HTTP server on 127.0.0.1 for the remote-reference tests: Hub-shaped API answers, files
with byte ranges behind redirects, the Ollama registry's manifests and blobs, and the failures real
servers have (gated, not found, rate limited, slow, cut short, no ranges, no answer at all).

The shapes follow what huggingface_hub asks and parses: `GET /api/models/ORG/NAME[/revision/REV]
?blobs=true` (ModelInfo with `siblings`), `GET /api/models?search=` (a list of models), `GET
/ORG/NAME/resolve/REV/PATH` (302 to a CDN path for large files, as the Hub redirects LFS files), and
the error headers it reads (`X-Error-Code: GatedRepo|RepoNotFound|EntryNotFound`). Ollama:
`GET /v2/NAMESPACE/NAME/manifests/TAG` and `/v2/NAMESPACE/NAME/blobs/sha256:DIGEST` (307 to a
blob store), `tags/list`.

Hostile answers (issue 30) are `Answer`s served as given for one path: a gzip bomb (`gzip_bomb`), a
drip of a byte every few seconds (`drip`), an endless `Link: next` page chain, a listing whose
fields have the wrong types.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    gated: bool = False
    token: str = "hf_good"


@dataclass
class Answer:
    """One answer served as given: `body` bytes (with a Content-Length), or a callable giving the
    chunks of a body sent as they come (then the connection closes at its end). `{url}` in a header
    value is the server's own address."""

    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes | Callable[[], Iterable[bytes]] = b""


def gzip_bomb(mib: int, fill: bytes = b" ") -> bytes:
    """A gzip member that decodes to `mib` MiB of `fill` (about 1 KB per MiB): each 1 MiB block is
    compressed after a full flush, so every block after the first has the same bytes."""
    block = fill * (1 << 20)
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    again = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    # a final empty fixed-Huffman block, then the gzip trailer: CRC-32 and length mod 2^32 (RFC 1952)
    return first + again * (mib - 1) + b"\x03\x00" + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


def drip(every_s: float, first: bytes = b"{", times: int = 120) -> Callable[[], Iterable[bytes]]:
    """A body of one byte every `every_s` seconds (at most `times` bytes: the server stops on its own)."""
    def chunks() -> Iterable[bytes]:
        yield first
        for _ in range(times):
            time.sleep(every_s)
            yield b" "
    return chunks


@dataclass
class Hub:
    repos: dict[str, Repo] = field(default_factory=dict)
    ollama: dict[str, dict] = field(default_factory=dict)
    """`namespace/name:tag` -> manifest."""
    blobs: dict[str, bytes] = field(default_factory=dict)
    """`sha256:...` -> bytes."""
    plain: dict[str, bytes] = field(default_factory=dict)
    """URL path -> bytes (a GGUF anywhere)."""
    status: dict[str, tuple[int, dict]] = field(default_factory=dict)
    """URL path prefix -> (status, headers) answered instead."""
    slow_s: float = 0.0
    """Sleep between 16 KiB chunks of file bodies."""
    truncate: bool = False
    """Send half of each file body, then close."""
    no_range: bool = False
    """Ignore Range: send the whole file (200)."""
    stall_s: float = 0.0
    """Wait this long before answering anything."""
    raw: dict[str, Answer] = field(default_factory=dict)
    """URL path -> an answer served as given, before anything else."""
    log: list[tuple[str, str, int]] = field(default_factory=list)
    """(path, range header, body bytes sent)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, needle: str = "") -> int:
        with self.lock:
            return sum(n for path, _, n in self.log if needle in path)

    def add_ollama(self, name: str, tag: str, gguf: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(gguf).hexdigest()
        ns, _, model = name.rpartition("/")
        self.blobs[digest] = gguf
        self.ollama[f"{ns or 'library'}/{model}:{tag}"] = {
            "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "0" * 64, "size": 2},
            "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": len(gguf)},
                       {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64, "size": 10}]}
        return digest


class _Handler(BaseHTTPRequestHandler):
    hub: Hub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        hub = self.hub
        if hub.stall_s:
            time.sleep(hub.stall_s)
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path in hub.raw:
            return self._answer(hub.raw[path])
        for prefix, (status, headers) in hub.status.items():
            if path.startswith(prefix):
                return self._send(status, b'{"error": "as configured"}', {"content-type": "application/json", **headers})
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path)
        if m:
            return self._listing(m[1])
        if path == "/api/models":
            return self._search(parse_qs(url.query))
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self._resolve(m[1], m[2], m[3])
        m = re.fullmatch(r"/cdn/([^/]+/[^/]+)/(.+)", path)
        if m and m[1] in hub.repos and m[2] in hub.repos[m[1]].files:
            return self._file(hub.repos[m[1]].files[m[2]], path)
        m = re.fullmatch(r"/v2/([^/]+)/([^/]+)/manifests/([^/]+)", path)
        if m:
            manifest = hub.ollama.get(f"{m[1]}/{m[2]}:{m[3]}")
            if manifest is None:
                return self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', {"content-type": "application/json"})
            return self._send(200, json.dumps(manifest).encode(), {"content-type": manifest["mediaType"]})
        m = re.fullmatch(r"/v2/([^/]+)/([^/]+)/tags/list", path)
        if m:
            tags = [k.split(":", 1)[1] for k in hub.ollama if k.startswith(f"{m[1]}/{m[2]}:")]
            return self._send(200 if tags else 404, json.dumps({"name": f"{m[1]}/{m[2]}", "tags": tags}).encode(),
                              {"content-type": "application/json"})
        m = re.fullmatch(r"/v2/[^/]+/[^/]+/blobs/(sha256:[0-9a-f]{64})", path)
        if m and m[1] in hub.blobs:
            return self._send(307, b"", {"location": f"/blobstore/{m[1]}?X-Amz-Signature=x"})
        m = re.fullmatch(r"/blobstore/(sha256:[0-9a-f]{64})", path)
        if m and m[1] in hub.blobs:
            return self._file(hub.blobs[m[1]], path)
        if path in hub.plain:
            return self._file(hub.plain[path], path)
        return self._send(404, b"not found", {"content-type": "text/plain"})

    # --- Hub API ---------------------------------------------------------------------------------
    def _listing(self, repo_id: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:  # the Hub answers 401 for a missing repo to an anonymous caller
            return self._send(401, b'{"error":"Repository not found"}',
                              {"content-type": "application/json", "x-error-code": "RepoNotFound",
                               "x-error-message": "Repository not found"})
        siblings = []
        for name, data in sorted(repo.files.items()):
            s = {"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest()}
            if len(data) > 4096:
                s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            siblings.append(s)
        body = {"_id": "x", "id": repo_id, "modelId": repo_id, "sha": repo.sha, "private": False,
                "gated": "auto" if repo.gated else False, "disabled": False, "tags": [], "siblings": siblings}
        self._send(200, json.dumps(body).encode(), {"content-type": "application/json"})

    def _search(self, query: dict) -> None:
        word = (query.get("search") or [""])[0].lower()
        author = (query.get("author") or [""])[0]
        hits = [r for r in self.hub.repos if (word and word[:6] in r.lower()) or (author and r.startswith(author + "/"))]
        self._send(200, json.dumps([{"_id": r, "id": r, "modelId": r, "tags": []} for r in hits]).encode(),
                   {"content-type": "application/json"})

    def _resolve(self, repo_id: str, rev: str, name: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._send(401, b"", {"x-error-code": "RepoNotFound", "x-error-message": "Repository not found"})
        if repo.gated and self.headers.get("authorization") != f"Bearer {repo.token}":
            return self._send(401, b"", {"x-error-code": "GatedRepo",
                                         "x-error-message": f"Access to model {repo_id} is restricted."})
        if rev not in ("main", repo.sha) or name not in repo.files:
            return self._send(404, b"", {"x-error-code": "EntryNotFound", "x-error-message": "Entry not found"})
        data = repo.files[name]
        if len(data) > 4096:  # LFS files: a redirect to the storage, as the Hub does
            return self._send(302, b"", {"location": f"/cdn/{repo_id}/{name}?sig=abc"})
        self._file(data, self.path)

    # --- bodies ----------------------------------------------------------------------------------
    def _answer(self, answer: Answer) -> None:
        here = f"http://{self.headers.get('host', '127.0.0.1')}"
        headers = {k: str(v).replace("{url}", here) for k, v in answer.headers.items()}
        if isinstance(answer.body, bytes):
            return self._send(answer.status, answer.body, headers)
        self.send_response(answer.status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("connection", "close")
        self.close_connection = True
        self.end_headers()
        sent = 0
        try:
            for chunk in answer.body():
                self.wfile.write(chunk)
                self.wfile.flush()
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.hub.lock:
                self.hub.log.append((self.path, self.headers.get("range", ""), sent))

    def _file(self, data: bytes, path: str) -> None:
        hub = self.hub
        rng = self.headers.get("range", "")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
        if m and not hub.no_range:
            start = int(m[1])
            end = min(int(m[2]) if m[2] else len(data) - 1, len(data) - 1)
            if start >= len(data):
                return self._send(416, b"", {"content-range": f"bytes */{len(data)}"}, path=path)
            body, status = data[start:end + 1], 206
            headers = {"content-range": f"bytes {start}-{end}/{len(data)}"}
        else:
            body, status, headers = data, 200, {}
        self._send(status, body, {"content-type": "application/octet-stream", "accept-ranges": "bytes", **headers},
                   path=path, stream=True)

    def _send(self, status: int, body: bytes, headers: dict, *, path: str = "", stream: bool = False) -> None:
        hub = self.hub
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        if stream:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        out = body[: len(body) // 2] if stream and hub.truncate else body
        sent = 0
        try:
            for i in range(0, len(out), 16384):
                if stream and hub.slow_s:
                    time.sleep(hub.slow_s)
                self.wfile.write(out[i:i + 16384])
                sent += len(out[i:i + 16384])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with hub.lock:
                hub.log.append((path or self.path, self.headers.get("range", ""), sent))
        if stream and hub.truncate:
            self.close_connection = True


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        """A client that hangs up (as the advisor does once it has read enough) is no error here."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Server:
    """`with Server(hub) as url:` a server on a free port of 127.0.0.1, stopped on exit."""

    def __init__(self, hub: Hub) -> None:
        handler = type("Handler", (_Handler,), {"hub": hub})
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
