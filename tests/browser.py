"""Real headless Chromium for the report tests, driven over the DevTools protocol
(``websocket-client``): open a page, wait for a condition evaluated in it, record the network
responses whose URL matches, take screenshots at given widths. Debian's ``chromium`` is the
browser (``.ci/run`` installs it); a missing browser fails the test that needs it, with the
reason."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("Debian chromium is required for this test (.ci/run installs it: apt-get install chromium)")
    return exe


class Page:
    """One headless Chromium with one page; ``with Page(tmp) as p: p.open(url)``."""

    def __init__(self, tmp: Path, width: int = 1400, height: int = 900) -> None:
        self.tmp, self.width, self.height = tmp, width, height
        self.proc: subprocess.Popen[str] | None = None
        self.ws: Any = None
        self.seq = 0
        self.events: list[dict[str, Any]] = []
        self.console_errors: list[str] = []

    def __enter__(self) -> "Page":
        import websocket  # websocket-client, the test extra

        self.proc = subprocess.Popen([chromium(), "--headless", "--no-sandbox", "--remote-debugging-port=0",
                                      "--disable-background-networking", "--no-first-run", "--disable-sync",
                                      "--disable-component-update", "--enable-unsafe-swiftshader",
                                      f"--user-data-dir={self.tmp / 'chromium-profile'}",
                                      f"--window-size={self.width},{self.height}", "about:blank"],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        url = None
        deadline = time.time() + 60
        assert self.proc.stderr is not None
        while url is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
        assert url, "chromium did not open its DevTools port"
        port = url.split(":")[2].split("/")[0]
        import urllib.request

        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json").read())
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.seq += 1
        me = self.seq
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg: dict[str, Any]) -> None:
        self.events.append(msg)
        if msg.get("method") == "Runtime.exceptionThrown":
            self.console_errors.append(json.dumps(msg["params"]["exceptionDetails"])[:500])
        if msg.get("method") == "Runtime.consoleAPICalled" and msg["params"].get("type") == "error":
            self.console_errors.append(json.dumps(msg["params"].get("args"))[:500])

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def eval(self, expr: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    def wait(self, expr: str, timeout: float = 60.0) -> Any:
        """Poll ``expr`` in the page until it is truthy; its value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.eval(expr)
            if got:
                return got
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {expr}")

    def responses(self, pattern: str) -> list[dict[str, Any]]:
        """The network responses so far whose URL matches ``pattern``: url, status, body."""
        self.eval("1")  # drain pending events
        out = []
        for ev in self.events:
            if ev.get("method") != "Network.loadingFinished":
                continue
            rid = ev["params"]["requestId"]
            resp = next((e["params"]["response"] for e in self.events if e.get("method") == "Network.responseReceived"
                         and e["params"]["requestId"] == rid), None)
            if resp is None or not re.search(pattern, resp["url"]):
                continue
            body = self.call("Network.getResponseBody", requestId=rid)
            text = base64.b64decode(body["body"]).decode() if body.get("base64Encoded") else body["body"]
            out.append({"url": resp["url"], "status": resp["status"], "body": text})
        return out

    def screenshot(self, path: Path, width: int | None = None) -> Path:
        if width is not None:
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=self.height, deviceScaleFactor=1,
                      mobile=False)
            time.sleep(0.3)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path
