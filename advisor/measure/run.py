"""Run the user's own benchmark here: an argument list (never a shell), a time limit, bounded output.

Nothing runs that the user did not ask for: `advisor verify` calls these only for the benchmark it was asked
to run (llama-bench found on PATH, an Ollama on this machine, `vllm bench serve` against a server the user
names). The program's output is read back by advisor/measure/parse.py; nothing in it is executed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Callable

from advisor.errors import AdvisorError, one_line

MAX_OUTPUT = 16 * 2**20
"""Bytes kept of each of the program's streams: a benchmark prints kilobytes; more is not a benchmark."""
DEFAULT_TIMEOUT_S = 600
"""Ten minutes: llama-bench's pp512 and tg128 three times over on a 70B split between a GPU and system RAM
(about 2 tokens/s there) take about five; a run that needs longer is asked for with --timeout."""


def _drain(stream, sink: bytearray, limit: int) -> None:
    """Read a pipe to its end, keeping the first `limit` bytes (the rest is read and dropped, so the program
    never blocks on a full pipe)."""
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if len(sink) < limit:
            sink += chunk[: limit - len(sink)]


def _progress(what: str, started: float, limit: float, done: threading.Event) -> None:
    """Elapsed seconds on stderr, once a second, while the program runs (a terminal only)."""
    while not done.wait(1.0):
        try:
            sys.stderr.write(f"\r{what}: {time.monotonic() - started:4.0f} s (stops at {limit:g} s)")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            return


def run_program(argv: list[str], timeout_s: float, what: str, env: dict[str, str] | None = None) -> str:
    """stdout of `argv` run to its end within `timeout_s`; AdvisorError (one line) when it cannot start,
    runs past the limit (its whole process group is stopped), fails, or prints too much."""
    tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
    shown = " ".join(argv)
    if not tty:
        try:
            sys.stderr.write(f"advisor verify: running {one_line(shown, 300)} (at most {timeout_s:g} s)\n")
        except (OSError, ValueError, AttributeError):
            pass
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # noqa: S603
                                env=env, start_new_session=True)
    except OSError as exc:
        raise AdvisorError(f"{what}: cannot run {one_line(argv[0], 200)} ({exc.strerror or exc})",
                           f"check that {what} runs from a shell") from None
    out, err = bytearray(), bytearray()
    readers = [threading.Thread(target=_drain, args=(s, b, MAX_OUTPUT), daemon=True)
               for s, b in ((proc.stdout, out), (proc.stderr, err))]
    done = threading.Event()
    started = time.monotonic()
    ticker = threading.Thread(target=_progress, args=(what, started, timeout_s, done), daemon=True)
    for t in readers + ([ticker] if tty else []):
        t.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise AdvisorError(f"{what} did not finish within {timeout_s:g} s; stopped it",
                           "give a longer --timeout, or fewer tokens (--prompt-tokens, --gen-tokens)") from None
    except KeyboardInterrupt:
        _stop(proc)
        raise
    finally:
        done.set()
        if tty:
            try:
                sys.stderr.write("\r" + " " * 60 + "\r")
            except (OSError, ValueError):
                pass
    for t in readers:
        t.join(5)
    if rc != 0:
        last = next((ln for ln in reversed(err.decode("utf-8", "replace").splitlines()) if ln.strip()), "")
        raise AdvisorError(f"{what} failed (exit {rc})" + (f": {one_line(last, 300)}" if last else ""),
                           f"run it yourself to see why: {one_line(shown, 300)}")
    if len(out) >= MAX_OUTPUT:
        raise AdvisorError(f"{what} printed more than {MAX_OUTPUT // 2**20} MiB: not a benchmark result")
    text = out.decode("utf-8", "replace")
    return text if text.strip() else err.decode("utf-8", "replace")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the program and everything it started (its own session), then reap it."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (OSError, AttributeError):
            proc.kill()
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


# -- Ollama: one /api/generate call to a local server ---------------------------------------------------------

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def ollama_host() -> str:
    """Ollama's address ($OLLAMA_HOST as Ollama reads it, default 127.0.0.1:11434): this machine only."""
    from urllib.parse import urlsplit

    raw = os.environ.get("OLLAMA_HOST", "").strip() or "127.0.0.1:11434"
    url = raw if "://" in raw else f"http://{raw}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in LOCAL_HOSTS and host != "0.0.0.0":
        raise AdvisorError(f"OLLAMA_HOST={one_line(raw, 100)} is not this machine",
                           "advisor verify measures the local Ollama only; unset OLLAMA_HOST or point it at 127.0.0.1")
    port = parts.port or 11434
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', 'localhost') else host}:{port}"


def ollama_generate(model: str, prompt_tokens: int, gen_tokens: int, ctx: int, timeout_s: float) -> str:
    """The JSON text of one non-streaming `/api/generate` with timings. The prompt opens with the time so
    Ollama's prompt cache cannot skip its prefill; it is about `prompt_tokens` words long."""
    import json
    import urllib.error
    import urllib.request

    prompt = f"{time.time_ns()} " + " ".join(["measure"] * max(prompt_tokens - 2, 1))
    body = json.dumps({"model": model, "prompt": prompt, "stream": False, "raw": True,
                       "options": {"num_predict": gen_tokens, "num_ctx": ctx, "temperature": 0, "seed": 0}}).encode()
    req = urllib.request.Request(f"{ollama_host()}/api/generate", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - a loopback address
            data = resp.read(MAX_OUTPUT + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        raise AdvisorError(f"Ollama answered {exc.code}: {one_line(detail, 200)}",
                           f"check that `ollama run {model}` works") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AdvisorError(f"no answer from Ollama at {ollama_host()} ({one_line(str(reason), 120)})",
                           "start it with `ollama serve`, or give results with --import") from None
    if len(data) > MAX_OUTPUT:
        raise AdvisorError("Ollama's answer is larger than a generate response")
    return data.decode("utf-8", "replace")


# -- NVML: each GPU's peak memory while a benchmark runs -----------------------------------------------------

class PeakMemory:
    """Samples each GPU's used memory through NVML (advisor/probe/nvml.py) while a benchmark runs; the peak
    above what was used before it started is what the run took. Nothing when NVML cannot be read."""

    def __init__(self, every_s: float = 0.5, read: Callable | None = None) -> None:
        self.every_s, self._read = every_s, read
        self.base: dict[int, int] = {}
        self.peak: dict[int, int] = {}
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _used(self) -> dict[int, int]:
        if self._read is None:
            from advisor.probe.nvml import read_nvml

            self._read = lambda: read_nvml(timeout_s=5.0)
        try:
            det = self._read()
        except Exception:  # noqa: BLE001 - no NVML here: nothing sampled
            return {}
        return {g.index: g.vram_bytes - g.vram_free_bytes for g in det.gpus
                if g.vram_bytes is not None and g.vram_free_bytes is not None}

    def __enter__(self) -> "PeakMemory":
        self.base = self._used()
        if self.base:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._done.wait(self.every_s):
            for i, used in self._used().items():
                self.peak[i] = max(self.peak.get(i, 0), used)

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(10)

    def taken(self) -> dict[int, int]:
        """Bytes each GPU held above its use before the run, at the run's peak."""
        return {i: max(self.peak[i] - self.base.get(i, 0), 0) for i in self.peak}
