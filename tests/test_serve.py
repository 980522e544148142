"""`advisor serve`: the app in a real headless Chromium, over loopback only.

The test starts `advisor serve` on a free port of 127.0.0.1, opens the page in Chromium (Debian's
`chromium` package, driven over its DevTools protocol with aiohttp, which textual-serve already brings),
and reads the verdict from the page's DOM: the terminal's screen-reader rows, which xterm.js keeps as text.
Chromium resolves no name but 127.0.0.1 (`--host-resolver-rules`), so the page's web font request fails
at once instead of reaching out. Without a Chromium binary the browser test is skipped, saying so.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM = os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
PAGE_S = 90
"""Longest the page may take to show the verdict (the app starts in a child per page load)."""

HOOK = r"""
(() => {  // keep the page's xterm.js Terminal when textual.js creates it, with its screen-reader rows on
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    get() { return undefined; },
    set(value) {
      Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
      if (value && value.options && value.buffer) { value.options.screenReaderMode = true; }
    },
  });
})();
"""
ROWS = "(document.querySelector('.xterm-accessibility-tree') || {}).innerText || ''"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, f"advisor serve exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"advisor serve did not listen on 127.0.0.1:{port} within {timeout_s} s")


class DevTools:
    """The few DevTools protocol calls the test makes, on one page target."""

    def __init__(self, ws) -> None:
        self.ws, self.n = ws, 0

    async def call(self, method: str, **params):
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        async for msg in self.ws:
            data = json.loads(msg.data)
            if data.get("id") == self.n:
                assert "error" not in data, data
                return data["result"]
        raise AssertionError("Chromium closed the DevTools connection")


async def page_text(url: str, profile: Path, shot: Path) -> str:
    """Open `url` in headless Chromium; the terminal's rows once they show a verdict (or after PAGE_S)."""
    import aiohttp

    browser = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                                f"--user-data-dir={profile}", "--window-size=1280,900",
                                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            await asyncio.sleep(0.1)
        port = port_file.read_text().split()[0]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PAGE_S + 30)) as http:
            targets = await (await http.get(f"http://127.0.0.1:{port}/json/list")).json()
            page = next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"]
            async with http.ws_connect(page, max_msg_size=0) as ws:
                tools = DevTools(ws)
                await tools.call("Page.enable")
                await tools.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
                await tools.call("Page.navigate", url=url)
                text, end = "", time.monotonic() + PAGE_S
                while time.monotonic() < end and "FITS" not in text:
                    await asyncio.sleep(0.5)
                    text = (await tools.call("Runtime.evaluate", expression=ROWS, returnByValue=True))["result"]["value"]
                png = await tools.call("Page.captureScreenshot", format="png")
                shot.write_bytes(base64.b64decode(png["data"]))
                return text
    finally:
        browser.terminate()
        browser.wait(10)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary here (Debian: apt-get install chromium; "
                                             "or set CHROMIUM=/path/to/chrome)")
def test_the_app_in_a_browser_shows_the_verdict(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "advisor", "serve", "llama-3.1-8b", "--gpu", "rtx-3090",
                               "--ram", "64", "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_listening(port, server)
        text = asyncio.run(asyncio.wait_for(page_text(f"http://127.0.0.1:{port}/", tmp_path / "profile",
                                                      tmp_path / "page.png"), PAGE_S + 60))
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the app it started for the page
        log = server.communicate(timeout=30)[0]
    assert "Llama 3.1 8B · F16 · 8,192 ctx on GeForce RTX 3090: FITS" in text, text[:2000]
    assert "fits in GPU memory" in text and "Rig: GeForce RTX 3090" in text
    assert f"http://127.0.0.1:{port}" in log  # where it said it listens
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serve_listens_on_loopback_unless_told(run_cli):
    from advisor.cli import build_parser

    args = build_parser("serve").parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    bad = run_cli("serve", "llama-9-70b", "--port", "8000")  # the app's input checks, before listening
    assert bad.returncode == 2 and "unknown model" in bad.stderr and "closest" in bad.stderr
    bad = run_cli("serve", "--port", "70000")
    assert bad.returncode == 2 and "--port" in bad.stderr


def test_the_page_runs_the_app_with_the_options_given():
    from advisor.cli import build_parser
    from advisor.commands.argwords import actions_of, command_words, given
    from advisor.commands.serve import app_command

    args = build_parser("serve").parse_args(["serve", "llama-3.1-70b", "--gpu", "2xrtx-3090", "--nvlink",
                                             "--ram", "64", "--host", "0.0.0.0", "--port", "9000"])
    actions = actions_of(args.app_parser())
    words = command_words(actions, given(actions, args))
    assert words == ["--gpu=2xrtx-3090", "--nvlink", "--ram=64", "--", "llama-3.1-70b"]  # not --host/--port
    assert app_command(words).endswith("-m advisor --gpu=2xrtx-3090 --nvlink --ram=64 -- llama-3.1-70b")
