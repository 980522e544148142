"""Metadata over HTTP, bounded and cached: small JSON documents and the first bytes of big files.

Everything a remote model reference needs (a Hub listing, `config.json`, a safetensors index, an
Ollama manifest, the header of a GGUF or safetensors file) is read here, and nothing else:

- **Range requests only.** A model file is read through `RangeFile`, a seekable reader that asks
  for `Range: bytes=A-B` as the header parser (`gguf_file`, `safetensors_file`: the same bounded
  parsers as for local files) moves forward, in growing chunks (256 KiB doubling to 8 MiB). A
  server that ignores the range and sends the whole file is read only as far as needed, then the
  connection is closed.
- **Bounded.** At most `MAX_REMOTE_BYTES` (64 MiB) per reference, counted on every byte received
  (listings and JSON included) *after* decoding: a gzip or deflate answer is decoded here, at most
  1 MiB per step, and each decoded byte counted, so a small compressed answer that expands without
  bound stops at the bound (only gzip and deflate are asked for and accepted). The largest real
  headers (a 262k-token vocabulary, DeepSeek V3's 163 safetensors shards) take 5-20 MB. Time: 4 s
  to connect, 6 s without progress (a new answer, the end of one, or 16 KiB received: a server
  sending a byte every few seconds makes none), 120 s in all; a watchdog in the calling thread
  enforces it even where a socket call would not return (a DNS lookup). No retries: a failure is
  one line (`AdvisorError`) at once.
- **Cached.** Each reference's answers (listing, JSON, header bytes) are written to one record
  under `$ADVISOR_CACHE_DIR/remote` (else the platform's cache folder), so asking again reads no
  network; delete the folder to read again.
- **Hub conventions** come from `huggingface_hub`: its endpoint (`HF_ENDPOINT`), token (`HF_TOKEN`
  or the saved login) and offline switch (`HF_HUB_OFFLINE`), its URL layout and its reading of an
  error answer (`hf_raise_for_status`). The listing itself is read here (`remote._hf_listing`), so
  its size and every field are checked before use. Its HTTP client is set to this module's bounded one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from advisor.errors import AdvisorError, one_line

MIB = 1024**2
MAX_REMOTE_BYTES = 64 * MIB
"""Bytes received for one model reference, all requests together."""
CONNECT_TIMEOUT_S = 4.0
STALL_TIMEOUT_S = 6.0
"""Seconds without progress before giving up: no new answer, no answer ending, fewer than
PROGRESS_BYTES received (a drip of a byte every 5 s is no progress)."""
PROGRESS_BYTES = 16 * 1024
"""Bytes that count as progress on their own: 2.7 KB/s, a link far slower than any that reads a
model's metadata in the 120 s allowed."""
TOTAL_TIMEOUT_S = 120.0
"""Seconds for one reference in all (the listing, the closest-names search of a 404, every header)."""
DECODE_STEP = 1 * MIB
"""Decoded bytes produced per step from a compressed answer (counted before the next step)."""
ENCODINGS = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
"""The content encodings asked for and decoded (zlib window bits); `deflate` without its zlib
wrapper (sent by some servers) is tried raw."""
FIRST_CHUNK = 256 * 1024
MAX_CHUNK = 8 * MIB
CACHE_VERSION = 1

Progress = Callable[[str], None]


class RemoteError(AdvisorError):
    """A remote read that failed: network, HTTP status, bound or malformed answer."""


# --- the HTTP client -------------------------------------------------------------------------

def httpx_module():
    """The HTTP library huggingface_hub uses (httpx2 in its 2.x releases, httpx before)."""
    try:
        import httpx2 as httpx  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - huggingface_hub 1.x
        import httpx  # type: ignore[no-redef]
    return httpx


class Meter:
    """Bytes and activity of the reference being read (one at a time per process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self, budget: int | None = None) -> None:
        self.bytes = 0
        self.pending = 0
        """Bytes since the last progress."""
        self.budget = MAX_REMOTE_BYTES if budget is None else budget
        self.started = self.last = time.monotonic()
        self.host = ""

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes += n
            self.pending += n
            if self.pending >= PROGRESS_BYTES:
                self.touch()
            if self.bytes > self.budget:
                raise RemoteError(f"reading this model's metadata took more than {self.budget // MIB} MiB "
                                  f"(the bound per reference): the server sent more than the headers",
                                  "this reference is not a model repository, or the server ignores range requests")

    def touch(self) -> None:
        """Progress: a request sent, an answer begun or ended, PROGRESS_BYTES received."""
        self.last = time.monotonic()
        self.pending = 0


METER = Meter()
_CLIENT = None
_CLIENT_LOCK = threading.Lock()


def client():
    """The one bounded client (shared with huggingface_hub, which then counts through it too)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = _make_client()
            try:
                from huggingface_hub import set_client_factory

                set_client_factory(lambda: _CLIENT)
            except ImportError:  # pragma: no cover - huggingface_hub is a dependency
                pass
        return _CLIENT


def _make_client():
    httpx = httpx_module()

    class CountingStream(httpx.SyncByteStream):
        """The body as sent, decoded here when compressed; every decoded byte counted."""

        def __init__(self, inner, encoding: str) -> None:
            self.inner, self.encoding = inner, encoding

        def __iter__(self):
            if not self.encoding:
                for chunk in self.inner:
                    METER.add(len(chunk))
                    yield chunk
            else:
                yield from _decoded(self.inner, self.encoding)
            METER.touch()  # the answer ended

        def close(self) -> None:
            close = getattr(self.inner, "close", None)
            if close:
                close()

    class CountingTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport(retries=0)

        def handle_request(self, request):
            METER.touch()
            METER.host = request.url.host
            response = self.inner.handle_request(request)
            METER.touch()
            encoding = _encoding(response.headers.get("content-encoding", ""), request.url.host)
            headers = response.headers
            if encoding:  # decoded here: httpx must not decode again, nor trust the encoded length
                headers = [(k, v) for k, v in response.headers.multi_items()
                           if k.lower() not in ("content-encoding", "content-length")]
            return httpx.Response(status_code=response.status_code, headers=headers,
                                  stream=CountingStream(response.stream, encoding), extensions=response.extensions)

        def close(self) -> None:
            self.inner.close()

    timeout = httpx.Timeout(STALL_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    return httpx.Client(transport=CountingTransport(), follow_redirects=True, timeout=timeout,
                        headers={"user-agent": "advisor (model metadata; range requests only)",
                                 "accept-encoding": ", ".join(ENCODINGS)})


def _encoding(header: str, host: str) -> str:
    """The one content encoding this reader decodes ("" for none), or a RemoteError."""
    words = [w.strip().lower() for w in header.split(",") if w.strip() and w.strip().lower() != "identity"]
    if not words:
        return ""
    if len(words) == 1 and words[0] in ENCODINGS:
        return words[0]
    raise RemoteError(f"{host} answered in the content encoding {one_line(header, 60)!r}, which was not asked for",
                      "the server must answer in gzip, deflate or plain bytes")


def _decoded(chunks, encoding: str):
    """The decoded body of a gzip or deflate answer, DECODE_STEP bytes at most per step, each step
    counted (METER.add raises past the bound) before the next is decoded."""
    d = zlib.decompressobj(ENCODINGS[encoding])
    first = True
    for chunk in chunks:
        data = chunk
        while True:
            try:
                out = d.decompress(data, DECODE_STEP)
            except zlib.error as exc:
                if not (first and encoding == "deflate"):
                    raise RemoteError(f"{METER.host or 'the server'} sent a corrupt {encoding} answer ({exc})",
                                      "try again later") from None
                d, first = zlib.decompressobj(-zlib.MAX_WBITS), False  # raw deflate, no zlib wrapper
                continue
            first = False
            if out:
                METER.add(len(out))
                yield out
            data = d.unconsumed_tail
            if not data and len(out) < DECODE_STEP:
                break


# --- errors ----------------------------------------------------------------------------------

def status_error(status: int, what: str, url: str, headers: Any = None, *, gated_hint: str = "",
                 closest: str = "") -> RemoteError:
    """One line for an HTTP error status."""
    host = urlsplit(url).netloc or url
    code = (headers or {}).get("x-error-code", "") if headers is not None else ""
    if status in (401, 403) or code == "GatedRepo":
        hint = gated_hint or "the server refused the request"
        kind = "gated or private" if gated_hint else "refused"
        return RemoteError(f"{what}: {host} answered {status} ({kind})", hint)
    if status == 404 or code in ("RepoNotFound", "EntryNotFound", "RevisionNotFound"):
        return RemoteError(f"{what}: not found on {host} (404)", closest or "check the name")
    if status == 429:
        wait = (headers or {}).get("retry-after", "") if headers is not None else ""
        return RemoteError(f"{what}: {host} is rate limiting requests (429)",
                           (f"try again in {wait} s" if wait.isdigit() else "try again later")
                           + "; signed-in requests (HF_TOKEN) get a higher limit" * bool(gated_hint))
    if status == 416:
        return RemoteError(f"{what}: {host} refused the byte range (416)", "the file is shorter than its listing says")
    return RemoteError(f"{what}: {host} answered HTTP {status}", "try again later")


def network_error(exc: BaseException, url: str, what: str) -> RemoteError:
    httpx = httpx_module()
    host = urlsplit(url).netloc or url
    if isinstance(exc, httpx.TimeoutException):
        return RemoteError(f"{what}: {host} did not answer within {STALL_TIMEOUT_S:.0f} s",
                           "check the network, or try again later")
    if isinstance(exc, (httpx.ConnectError, httpx.NetworkError)):
        reason = str(exc).split("] ")[-1][:120] or type(exc).__name__
        return RemoteError(f"{what}: can't reach {host} ({reason})",
                           "check the network: a remote reference needs it the first time, then it is cached")
    if isinstance(exc, httpx.HTTPError):
        return RemoteError(f"{what}: {host}: {one_line(str(exc), 160) or type(exc).__name__}", "try again later")
    return RemoteError(f"{what}: {one_line(str(exc), 200) or type(exc).__name__}", "")


# --- one reference's record: live (network) or replayed from the cache -------------------------

def cache_root() -> Path | None:
    from advisor.catalog.load import cache_dir

    root = cache_dir()
    return root / "remote" if root else None


@dataclass
class Record:
    """What one reference read: JSON answers by name, file sizes and header prefixes by URL."""

    key: str
    json: dict[str, Any] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    prefixes: dict[str, bytes] = field(default_factory=dict)


class Source:
    """Reads for one reference. Live: over the network (recording what it read); replay: from the
    cached record only (a miss raises `CacheMiss`, and the caller reads live)."""

    def __init__(self, key: str, *, live: bool, record: Record | None = None, headers: dict[str, str] | None = None,
                 label: str = "") -> None:
        self.live = live
        self.record = record or Record(key)
        self.headers = headers or {}
        self.label = label
        self.lock = threading.Lock()

    # JSON documents (listings, config.json, manifests) --------------------------------------
    def json(self, name: str, fetch: Callable[[], Any]) -> Any:
        """The JSON answer recorded as `name`, or `fetch()` (live) recorded under it."""
        if name in self.record.json:
            return self.record.json[name]
        if not self.live:
            raise CacheMiss(name)
        value = fetch()
        with self.lock:
            self.record.json[name] = value
        return value

    def get_json(self, name: str, url: str, limit: int, what: str, headers: dict[str, str] | None = None,
                 on_status: Callable[[int, Any], RemoteError] | None = None) -> Any:
        return self.json(name, lambda: json_from(get_small(url, limit, what, {**self.headers, **(headers or {})},
                                                           on_status), url, what, limit))

    # files read by range ---------------------------------------------------------------------
    def open(self, url: str, what: str, size: int | None = None,
             on_status: Callable[[int, Any], RemoteError] | None = None) -> RangeFile:
        known = self.record.files.get(url)
        if known is not None:
            prefix = self.record.prefixes.get(url, b"")
            return RangeFile(self, url, known["size"], what, prefix, on_status)
        if not self.live:
            raise CacheMiss(url)
        f = RangeFile(self, url, size, what, b"", on_status)
        f.start()
        return f

    def done(self, f: RangeFile) -> None:
        f.close()
        with self.lock:
            self.record.files[f.url] = {"size": f.size}
            self.record.prefixes[f.url] = bytes(f.data)


class CacheMiss(Exception):
    pass


def get_small(url: str, limit: int, what: str, headers: dict[str, str],
              on_status: Callable[[int, Any], RemoteError] | None = None) -> bytearray:
    """A whole small document (JSON), at most `limit` bytes (refused as soon as it says or shows it
    is larger; returned as the buffer it was read into, not a copy: an index may be tens of MB)."""
    too_big = RemoteError(f"{what}: the answer is larger than the {limit // 1024} KiB accepted",
                          "this is not a model's metadata")
    try:
        with client().stream("GET", url, headers=headers) as resp:
            if resp.status_code >= 400:
                raise (on_status or _default_status(url, what))(resp.status_code, resp.headers)
            length = resp.headers.get("content-length", "")
            if length.isdigit() and int(length[:20]) > limit:
                raise too_big
            out = bytearray()
            for chunk in resp.iter_bytes():
                out += chunk
                if len(out) > limit:
                    raise too_big
            return out
    except RemoteError:
        raise
    except Exception as exc:  # noqa: BLE001 - every library failure becomes one line
        if isinstance(exc, httpx_module().HTTPError) or isinstance(exc, OSError):
            raise network_error(exc, url, what) from None
        raise


def json_from(raw: bytes | bytearray, url: str, what: str, limit: int | None = None) -> Any:
    """A JSON answer, parsed within the bounds of `limits.parse_json` (`limit`: the answer's byte limit)."""
    from advisor.modelfile.limits import parse_json

    return parse_json(raw, url, what, limit=limit)


def _default_status(url: str, what: str):
    return lambda status, headers: status_error(status, what, url, headers)


class RangeFile:
    """A remote file read forward by range requests: `seek`, `read`, `tell`, as the parsers use a file.

    The bytes fetched so far are kept as one prefix of the file (headers are read from the start);
    `size` comes from the listing or the first answer's Content-Range."""

    def __init__(self, source: Source, url: str, size: int | None, what: str, prefix: bytes,
                 on_status: Callable[[int, Any], RemoteError] | None) -> None:
        self.source, self.url, self.size, self.what = source, url, size, what
        self.data = bytearray(prefix)
        self.pos = 0
        self.chunk = FIRST_CHUNK
        self.on_status = on_status or _default_status(url, what)
        self._open = None
        self._chunks = None
        self._whole = False

    def __enter__(self) -> RangeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._open is not None:
            cm, self._open, self._chunks = self._open, None, None
            try:
                cm.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a connection we no longer need
                pass

    def start(self) -> None:
        """The first chunk (and the size, when the listing did not give it)."""
        self._fetch(FIRST_CHUNK if self.size is None else min(FIRST_CHUNK, self.size))

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else (self.size or 0) + pos
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        assert self.size is not None
        end = self.size if n is None or n < 0 else min(self.pos + n, self.size)
        if end > len(self.data):
            if not self.source.live:
                raise CacheMiss(self.url)
            self._fetch(end)
        out = bytes(self.data[self.pos:end])
        self.pos = max(self.pos, end)
        return out

    def _fetch(self, end: int) -> None:
        start = len(self.data)
        end = max(end, start + self.chunk)
        if self.size is not None:
            end = min(end, self.size)
        self.chunk = min(self.chunk * 2, MAX_CHUNK)
        if end <= start:
            return
        try:
            if self._open is None:
                self._request(start, end)
            got = bytearray()
            want = end - start
            for chunk in self._chunks:
                got += chunk
                if len(got) >= want:
                    break
        except RemoteError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001
            self.close()
            if isinstance(exc, httpx_module().HTTPError) or isinstance(exc, OSError):
                raise network_error(exc, self.url, self.what) from None
            raise
        if not self._whole:  # one range, one answer
            self.close()
            got = got[:want]
        if len(got) < want:
            self.close()
            raise RemoteError(f"{self.what}: the server sent {len(got)} of the {want} bytes asked for "
                              f"(bytes {start}-{end - 1} of {self.size})", "the answer was cut short: try again")
        self.data += got  # a whole-file answer stays open, read on only if the parser needs more

    def _request(self, start: int, end: int) -> None:
        """Open one answer for bytes start..end-1. A server that ignores ranges answers the whole
        file (200): read from the start, it is kept open and read on as the parser needs (never
        further), then closed."""
        cm = client().stream("GET", self.url, headers={**self.source.headers, "range": f"bytes={start}-{end - 1}",
                                                       "accept-encoding": "identity"})
        resp = cm.__enter__()
        self._open, self._chunks = cm, resp.iter_bytes()
        if resp.status_code >= 400:
            raise self.on_status(resp.status_code, resp.headers)
        total = self._total(resp)
        self._whole = resp.status_code == 200
        if self._whole and start > 0:
            raise RemoteError(f"{self.what}: {urlsplit(self.url).netloc} does not serve byte ranges",
                              "only servers that answer range requests can be read without downloading")
        if self.size is None:
            self.size = total
        elif total is not None and total != self.size:
            raise RemoteError(f"{self.what}: the server says {total} bytes, the listing {self.size}",
                              "the file changed while it was read: try again")

    def _total(self, resp) -> int | None:
        rng = resp.headers.get("content-range", "")
        if resp.status_code == 206 and "/" in rng:
            tail = rng.rsplit("/", 1)[1].strip()
            if tail.isdigit():
                return int(tail)
        if resp.status_code == 200 and resp.headers.get("content-length", "").isdigit():
            return int(resp.headers["content-length"])
        if self.size is None:
            raise RemoteError(f"{self.what}: {urlsplit(self.url).netloc} gives no file size",
                              "the server must answer range requests with Content-Range")
        return None


# --- the record on disk ----------------------------------------------------------------------

def record_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def load_record(key: str) -> Record | None:
    root = cache_root()
    if root is None:
        return None
    meta_path, blob_path = root / f"{key}.json", root / f"{key}.bin"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        blob = blob_path.read_bytes() if blob_path.is_file() else b""
        if meta.get("version") != CACHE_VERSION or hashlib.sha256(blob).hexdigest() != meta.get("blob_sha256"):
            return None
        rec = Record(key, json=meta["json"], files=meta["files"])
        for url, info in rec.files.items():
            rec.prefixes[url] = blob[info["offset"]:info["offset"] + info["length"]]
        return rec
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_record(rec: Record, ref: str) -> None:
    """Write the record (blob first, then its index, each atomically); a failure only costs the cache."""
    root = cache_root()
    if root is None:
        return
    blob = bytearray()
    files = {}
    for url, info in rec.files.items():
        prefix = rec.prefixes.get(url, b"")
        files[url] = {"size": info["size"], "offset": len(blob), "length": len(prefix)}
        blob += prefix
    meta = {"version": CACHE_VERSION, "ref": ref, "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "blob_sha256": hashlib.sha256(blob).hexdigest(), "json": rec.json, "files": files}
    try:
        root.mkdir(parents=True, exist_ok=True)
        _write_bytes(root / f"{rec.key}.bin", bytes(blob))
        _write_bytes(root / f"{rec.key}.json", json.dumps(meta).encode("utf-8"))
    except OSError:
        pass


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# --- running one reference: cache first, then live under a watchdog ------------------------------

def run(key: str, ref: str, read: Callable[[Source], Any], *, headers: dict[str, str] | None = None,
        offline: str = "", progress: Progress | None = None) -> Any:
    """`read(source)` from the cached record when it has everything, else live (unless `offline`
    says why the network is off), bounded in bytes and time; the live record is then cached."""
    cached = load_record(key)
    if cached is not None:
        try:
            return read(Source(key, live=False, record=cached, headers=headers, label=ref))
        except CacheMiss:
            pass
    if offline:
        raise RemoteError(f"{ref}: {offline}, and it has not been read before", "unset it once to read this reference")
    source = Source(key, live=True, headers=headers, label=ref)
    result = _watched(lambda: read(source), ref, progress)
    save_record(source.record, ref)
    return result


def _watched(fn: Callable[[], Any], ref: str, progress: Progress | None) -> Any:
    """Run `fn` in a worker thread; give up when no byte has come for STALL_TIMEOUT_S or after
    TOTAL_TIMEOUT_S (a worker stuck in a DNS lookup is left behind: it is a daemon thread)."""
    METER.reset()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="advisor-remote", daemon=True)
    worker.start()
    shown = False
    tty = progress is not None and _stderr_tty()
    try:
        while worker.is_alive():
            worker.join(0.25)
            now = time.monotonic()
            if not worker.is_alive():
                break
            if now - METER.last > STALL_TIMEOUT_S:
                raise _stalled(ref)
            if now - METER.started > TOTAL_TIMEOUT_S:
                raise RemoteError(f"{ref}: reading its metadata took more than {TOTAL_TIMEOUT_S:.0f} s",
                                  "the server is too slow: try again later")
            if tty and now - METER.started > 1.0:
                progress(f"\r{one_line(_progress_line(ref), 200)}\x1b[K")
                shown = True
    finally:
        if shown:  # cleared before anything else is written: an error is then the one line on stderr
            progress("\r\x1b[K")
    if "error" in box:
        raise box["error"]
    if progress is not None and not tty and time.monotonic() - METER.started > 1.0:
        # Not a terminal: nothing printed can be taken back, so a slow read is said once it succeeded.
        progress(one_line(f"{_progress_line(ref)} in {time.monotonic() - METER.started:.1f} s; cached", 300) + "\n")
    return box.get("value")


def _progress_line(ref: str) -> str:
    return f"advisor: reading the metadata of {ref} from {METER.host or 'the network'}: {METER.bytes / 1e6:.1f} MB"


def _stalled(ref: str) -> RemoteError:
    where = METER.host or "the server"
    if METER.pending:
        return RemoteError(f"{ref}: {where} sent only {METER.pending} bytes in {STALL_TIMEOUT_S:.0f} s",
                           "the server or the network is too slow: try again later")
    return RemoteError(f"{ref}: {where} did not answer within {STALL_TIMEOUT_S:.0f} s",
                       "check the network, or try again later")


def _stderr_tty() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (OSError, ValueError):
        return False
