#!/usr/bin/env python3
"""The floors under the bench's timed rows, measured on a bare Chromium over CDP (no webpilot):
what no tool driving this browser can beat.

  python3 bench/floors.py [--reps 10] [--chromium /usr/bin/chromium]

- capture: `Page.captureScreenshot` of the 1280×720 viewport of the peer's spa.html, PNG, as
  Chromium encodes it by default and with `optimizeForSpeed` (what webpilot asks for);
- spa_text: from the start of a navigation to spa.html until "Showing 50 of 50 items" is in the
  DOM, read by a MutationObserver installed before the page's own scripts (the moment a
  `wait_for` could answer at best; the page's own fetch takes 300 ms);
- article_load: from the start of a navigation to the static article until its `load` event.

Medians and min–max over --reps, printed as JSON. Stdlib only: a minimal WebSocket client.
"""
from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.environ.get("WEBPILOT_PEER_DIR", os.path.join(HERE, "..", "..", "shared", "bench", "peer")),
                        "fixtures")
SPA_READY = "Showing 50 of 50 items"
WATCH_TEXT = """(() => { const t = %s; const seen = () => { if (!window.__seenAt && document.body
  && document.body.innerText.includes(t)) window.__seenAt = performance.now(); };
  new MutationObserver(seen).observe(document, {childList: true, subtree: true, characterData: true}); })()"""


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Cdp:
    """One WebSocket to a page target: send a command, read until its answer."""

    def __init__(self, url: str):
        host, rest = url[len("ws://"):].split("/", 1)
        name, port = host.split(":")
        self.sock = socket.create_connection((name, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{rest} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += self.sock.recv(4096)
        self.buffer = answer.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self.sock.recv(1 << 20)
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self) -> bytes:
        head = self._read(2)
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._read(8))[0]
        return self._read(length)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        length = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | length]) if length < 126 else
                                  bytes([0x80 | 126]) + struct.pack(">H", length) if length < 65536 else
                                  bytes([0x80 | 127]) + struct.pack(">Q", length))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            message = json.loads(self._frame())
            if message.get("id") == self.next_id:
                return message.get("result", {})

    def wait_event(self, method: str) -> dict:
        while True:
            message = json.loads(self._frame())
            if message.get("method") == method:
                return message.get("params", {})


def start_chromium(binary: str) -> tuple[subprocess.Popen, str, str]:
    profile = tempfile.mkdtemp(prefix="floors-")
    proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--no-first-run", "--disable-extensions", "--window-size=1280,720",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if time.monotonic() > deadline:
            raise SystemExit("chromium did not start")
        time.sleep(0.05)
    port = open(port_file).read().split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as response:
        page = next(t for t in json.load(response) if t["type"] == "page")
    return proc, page["webSocketDebuggerUrl"], profile


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=FIXTURES))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    proc, url, profile = start_chromium(args.chromium)
    try:
        cdp = Cdp(url)
        cdp.call("Page.enable")
        cdp.call("Page.addScriptToEvaluateOnNewDocument", source=WATCH_TEXT % json.dumps(SPA_READY))
        rows: dict[str, list[float]] = {}
        for i in range(args.reps + 1):
            cdp.call("Page.navigate", url=f"{base}/spa.html")
            cdp.wait_event("Page.loadEventFired")
            seen = None
            while seen is None:
                seen = cdp.call("Runtime.evaluate", expression="window.__seenAt || null",
                                returnByValue=True)["result"].get("value")
            if i:
                rows.setdefault("spa_text", []).append(seen)
        for i in range(args.reps + 1):
            for name, fast in (("capture_png", False), ("capture_png_fast", True)):
                start = time.perf_counter()
                cdp.call("Page.captureScreenshot", format="png", optimizeForSpeed=fast)
                if i:
                    rows.setdefault(name, []).append((time.perf_counter() - start) * 1000)
        for i in range(args.reps + 1):
            start = time.perf_counter()
            cdp.call("Page.navigate", url=f"{base}/article.html")
            cdp.wait_event("Page.loadEventFired")
            if i:
                rows.setdefault("article_load", []).append((time.perf_counter() - start) * 1000)
        print(json.dumps({name: spread(values) for name, values in rows.items()}, indent=1))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
