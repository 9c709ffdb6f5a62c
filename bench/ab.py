#!/usr/bin/env python3
"""A/B of two webpilot binaries on the bench's browser sequences, alternating, in one run.

scripts/bench compares webpilot with the peer; this compares a change with what came before it,
where a few milliseconds matter and one bench run's spread is as large as the change. Each round
starts each binary in turn (its own Chromium, the peer's fixture pages served here on 127.0.0.1)
and times over REST:
- the bench's SPA sequence: reset to index.html, navigate to spa.html alone, reset, navigate to
  spa.html with wait_for "Showing 50 of 50 items" (the rows navigate_only / navigate_wait_for);
- element lists: the 200-element page, and the SPA's elements and text.

    python3 bench/ab.py --a /tmp/webpilot-old --b target/release/webpilot --rounds 2 --reps 15

Prints the median of every measure for A and B and B's change in per cent.
"""
from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(os.environ.get("WEBPILOT_PEER_DIR", os.path.join(REPO, "..", "shared", "bench", "peer")),
                        "fixtures")
SPA_READY = "Showing 50 of 50 items"


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_fixtures() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=FIXTURES))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """One webpilot process and a keep-alive connection to it."""

    def __init__(self, binary: str):
        self.port = free_port()
        self.data = tempfile.mkdtemp(prefix="wp-ab-")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--data-dir", self.data, "--fetch-allow", "127.0.0.1", "serve"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                probe.request("GET", "/healthz")
                probe.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def call(self, tool: str, args: dict) -> tuple[float, dict]:
        start = time.perf_counter()
        self.conn.request("POST", f"/api/tools/{tool}", json.dumps(args), {"content-type": "application/json"})
        body = json.loads(self.conn.getresponse().read())
        if "error" in body:
            raise RuntimeError(f"{tool} {args}: {body['error']}")
        return (time.perf_counter() - start) * 1000, body

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def measure(binary: str, base: str, reps: int, warmup: int = 2) -> dict[str, list[float]]:
    service = Service(binary)
    times: dict[str, list[float]] = {}

    def keep(i: int, name: str, ms: float):
        if i >= warmup:
            times.setdefault(name, []).append(ms)

    try:
        for i in range(reps + warmup):
            service.call("browser_navigate", {"target": f"{base}/index.html", "max_tokens": 0})
            keep(i, "navigate_only", service.call("browser_navigate", {"target": f"{base}/spa.html"})[0])
            keep(i, "reset", service.call("browser_navigate", {"target": f"{base}/index.html", "max_tokens": 0})[0])
            ms, body = service.call("browser_navigate", {"target": f"{base}/spa.html", "wait_for": SPA_READY})
            if (body.get("ready") or {}).get("by") != "wait_for":
                raise RuntimeError(f"wait_for not met: {body.get('ready')}")
            keep(i, "navigate_wait_for", ms)
        for i in range(reps + warmup):
            keep(i, "spa_elements", service.call("browser_read", {"mode": "elements"})[0])
            keep(i, "spa_text", service.call("browser_read", {"mode": "text"})[0])
        service.call("browser_navigate", {"target": f"{base}/elements.html", "max_tokens": 0})
        for i in range(reps + warmup):
            keep(i, "elements_200", service.call("browser_read", {"mode": "elements", "max_tokens": 100000})[0])
    finally:
        service.stop()
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the binary before the change")
    ap.add_argument("--b", required=True, help="the binary after the change")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running A then B")
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions per binary per round")
    args = ap.parse_args()

    base = serve_fixtures()
    results: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for _ in range(args.rounds):
        for label, binary in (("A", args.a), ("B", args.b)):
            for name, values in measure(binary, base, args.reps).items():
                results[label].setdefault(name, []).extend(values)

    print(f"| measure (ms, median of {args.rounds}×{args.reps}) | A | B | B vs A |")
    print("| --- | --- | --- | --- |")
    for name, a_values in results["A"].items():
        a = statistics.median(a_values)
        b = statistics.median(results["B"][name])
        print(f"| {name} | {a:.1f} | {b:.1f} | {100 * (b / a - 1):+.1f} % |")


if __name__ == "__main__":
    main()
