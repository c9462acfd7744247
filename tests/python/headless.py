"""Headless Chromium for tests, driven over the DevTools protocol on a pipe: standard library only.

``--remote-debugging-pipe`` makes the browser read protocol messages from fd 3 and write them to fd 4,
each a JSON object ended by a NUL byte, so there is no port, no websocket and no driver binary. One
browser per ``Chromium`` (a fresh profile in a temporary directory, its own process group); ``open``
loads a page in a new tab and returns what a reader would see: the page's own state from a script, every
console error, exception, log error and request, and a full-page PNG screenshot.

Nothing leaves the machine: the pages are ``file://``, name resolution maps every host to nothing, and
background networking, component updates and sync are off.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The Debian binary first: /usr/bin/chromium is a launcher script that adds flags of its own.
CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",  # as root there is no sandbox; the pages are the test's own files
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-pings",
    "--mute-audio",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-pipe",
)
CALL_TIMEOUT_S = 15.0


class BrowserError(RuntimeError):
    """The browser answered with an error, went away, or did not answer in time."""


def find_chromium() -> str | None:
    """The browser to use: ``$SGLBENCH_CHROMIUM``, else the first of ``CANDIDATES`` present."""
    wanted = os.environ.get("SGLBENCH_CHROMIUM")
    for name in (wanted,) if wanted else CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class Page:
    """What one page load showed: ``facts`` is the value of the caller's script."""

    facts: Any
    console_errors: list[str]
    request_urls: list[str]
    screenshot: bytes


@dataclass
class _Pipe:
    """The two ends the browser does not hold: write requests, read answers and events."""

    write_fd: int
    read_fd: int
    buffer: bytes = b""
    events: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 0

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.write_fd, data) :]

    def receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise BrowserError(f"no answer from the browser within {CALL_TIMEOUT_S:.0f} s")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its DevTools pipe (it exited)")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)


def _high(fd: int) -> int:
    """A close-on-exec copy of ``fd`` numbered 10 or more, so moving it to 3 or 4 clobbers nothing."""
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return copy


class Chromium:
    """One headless browser process; use as a context manager so the process group always ends."""

    def __init__(self, executable: str, workdir: Path) -> None:
        self.log = workdir / "chromium.log"
        profile = workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        child_r, child_w = _high(to_browser_r), _high(from_browser_w)

        def _pipe_fds() -> None:  # in the child, before exec: the protocol's fd 3 and fd 4
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        env = {**os.environ, "HOME": str(profile), "XDG_CONFIG_HOME": str(profile / ".config")}
        env["XDG_CACHE_HOME"] = str(profile / ".cache")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_pipe_fds,
                close_fds=False,  # fd 3 and 4 must survive exec; every other fd Python made is close-on-exec
                start_new_session=True,
            )
        os.close(child_r)
        os.close(child_w)
        self.pipe = _Pipe(to_browser_w, from_browser_r)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """Send one command and wait for its answer; events that arrive meanwhile are kept."""
        self.pipe.next_id += 1
        msg: dict[str, Any] = {"id": self.pipe.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.pipe.send(msg)
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while True:
            answer = self.pipe.receive(deadline)
            if answer.get("id") != msg["id"]:
                self.pipe.events.append(answer)
                continue
            if "error" in answer:
                raise BrowserError(f"{method}: {answer['error']}\n{self.log_tail()}")
            return answer.get("result", {})

    def wait_event(self, session: str, method: str, **params: Any) -> dict[str, Any]:
        """The first event ``method`` of ``session`` whose params include ``params``, kept or to come."""
        deadline = time.monotonic() + CALL_TIMEOUT_S
        seen = 0
        while True:
            for ev in self.pipe.events[seen:]:
                if (ev.get("method"), ev.get("sessionId")) == (method, session) and (
                    params.items() <= ev.get("params", {}).items()
                ):
                    return ev
            seen = len(self.pipe.events)
            self.pipe.events.append(self.pipe.receive(deadline))

    def open(self, url: str, script: str, *, width: int = 1280, height: int = 900) -> Page:
        """Load ``url`` in a new tab, wait for its load event, evaluate ``script`` and screenshot the page.

        ``script`` is an expression (it may be a promise) whose JSON value becomes ``Page.facts``.
        """
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.pipe.events = [ev for ev in self.pipe.events if ev.get("sessionId") != session]
        nav = self.call("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            raise BrowserError(f"{url}: {nav['errorText']}")
        # The load event of this navigation (its loader), not a late one of the blank tab.
        self.wait_event(session, "Page.lifecycleEvent", name="load", loaderId=nav["loaderId"])
        value = self.call(
            "Runtime.evaluate", {"expression": script, "awaitPromise": True, "returnByValue": True}, session
        )
        if "exceptionDetails" in value:
            raise BrowserError(f"the test's script failed: {value['exceptionDetails']}")
        size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = self.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            },
            session,
        )
        self.call("Target.closeTarget", {"targetId": target})
        events = [ev for ev in self.pipe.events if ev.get("sessionId") == session]
        sent = [ev["params"]["request"] for ev in events if ev.get("method") == "Network.requestWillBeSent"]
        return Page(
            facts=value["result"].get("value"),
            console_errors=[e for e in map(_error_text, events) if e],
            request_urls=[r["url"] for r in sent],
            screenshot=base64.b64decode(shot["data"]),
        )

    def log_tail(self, lines: int = 20) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "chromium log (last lines):\n" + "\n".join(text.splitlines()[-lines:])

    def close(self) -> None:
        """Ask the browser to quit, then end whatever is left of its process group."""
        if self.proc.poll() is None:
            with contextlib.suppress(BrowserError, OSError):
                self.call("Browser.close")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # renderer, GPU and zygote children too
        self.proc.wait(timeout=5)
        os.close(self.pipe.write_fd)
        os.close(self.pipe.read_fd)


def _error_text(ev: dict[str, Any]) -> str:
    """The text of a console error, an uncaught exception or an error log entry; "" for other events."""
    method, params = ev.get("method"), ev.get("params", {})
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return "exception: " + str(details.get("exception", {}).get("description", details.get("text")))
    if method == "Log.entryAdded" and params["entry"].get("level") == "error":
        entry = params["entry"]
        return f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip()
    return ""
