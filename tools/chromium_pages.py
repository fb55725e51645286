"""Screenshots of many pages from one headless Chromium, driven over the DevTools protocol on a pipe.

``chromium --screenshot=PNG URL`` starts a browser per page: about 0.7 s of CPU and 1 s of wall time
each, most of it the browser's own start-up. ``Browser`` starts one with ``--remote-debugging-pipe``
(the protocol's JSON messages, each ended by a NUL byte, read from the browser's file descriptor 3
and written to its 4; here its standard input and output are moved there), opens one tab, and for
each page navigates, waits for the page's load event and captures the viewport as PNG
(``Page.navigate``, ``Page.loadEventFired``, ``Page.captureScreenshot``: the Chrome DevTools Protocol,
https://chromedevtools.github.io/devtools-protocol/). Nothing leaves the machine: ``file://`` pages,
a fresh profile, no network features.
"""

from __future__ import annotations

import base64
import json
import select
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
PIPE_FDS = 'exec "$@" 3<&0 4>&1 0</dev/null 1>/dev/null'
"""The browser reads the protocol on fd 3 and writes it on fd 4: our pipes, moved there by the shell."""


class BrowserError(RuntimeError):
    """The browser ended, answered with an error, or did not answer within the timeout."""


class Browser:
    """One headless Chromium and one tab of ``width`` x ``height`` CSS pixels; a context manager."""

    def __init__(self, binary: str, width: int, height: int, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory()
        self._process = subprocess.Popen(
            ["sh", "-c", PIPE_FDS, "sh", binary, *FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._buffer = b""
        self._last_id = 0
        self._events: list[str] = []
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self._call("Page.enable", session=self._session)
            self._call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                              "deviceScaleFactor": 1, "mobile": False},
                       session=self._session)
        except BaseException:
            self._abandon()  # a browser that did not come up is not left running
            raise

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the browser (the protocol's ``Browser.close``, then a kill if it lingers)."""
        try:
            self._send("Browser.close", {}, None)
            self._process.wait(timeout=10)
        except (BrowserError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            self._release()

    def _abandon(self) -> None:
        """Kill the browser now, close our ends of its pipes and remove its profile."""
        self._process.kill()
        self._process.wait()
        self._release()

    def _release(self) -> None:
        """Close our ends of the protocol pipes and remove the profile (the browser has ended)."""
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()
            except BrokenPipeError:  # bytes the ended browser never read; the pipe is closed all the same
                pass
        self._profile.cleanup()

    def screenshot(self, url: str, png: Path) -> None:
        """Load ``url`` in the tab and write its viewport to ``png``."""
        self._events.clear()
        self._call("Page.navigate", {"url": url}, session=self._session)
        self._await_event("Page.loadEventFired")
        data = self._call("Page.captureScreenshot", {"format": "png"}, session=self._session)["data"]
        png.write_bytes(base64.b64decode(data))

    def _send(self, method: str, params: dict, session: str | None) -> int:
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        try:
            self._process.stdin.write(json.dumps(message).encode() + b"\0")
            self._process.stdin.flush()
        except BrokenPipeError:  # the browser ended before reading it
            raise self._ended() from None
        return self._last_id

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        wanted = self._send(method, params or {}, session)
        while True:
            message = self._receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self._events.append(message["method"])

    def _await_event(self, name: str) -> None:
        """Wait for the event ``name`` (or take it if it already arrived)."""
        while name not in self._events:
            message = self._receive()
            if "method" in message:
                self._events.append(message["method"])
        self._events.clear()

    def _ended(self) -> BrowserError:
        """The error for a browser whose end of the protocol pipe is closed, named by its exit code."""
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return BrowserError(f"the browser closed the protocol pipe (exit {code})")

    def _receive(self) -> dict:
        """The next message, waiting at most ``timeout`` seconds for it."""
        deadline = time.monotonic() + self.timeout
        out = self._process.stdout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise BrowserError(f"no answer from the browser within {self.timeout:g} s")
            chunk = out.read1(1 << 20)
            if not chunk:
                raise self._ended()
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)
