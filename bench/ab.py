#!/usr/bin/env python3
"""A/B of two webpilot binaries on the bench's browser sequences, alternating, in one run.

scripts/bench compares webpilot with the peer; this compares a change with what came before it,
where a few milliseconds matter and one bench run's spread is as large as the change. Each round
starts each binary in turn (its own Chromium, the peer's fixture pages served here on 127.0.0.1)
and times over REST:
- the bench's SPA sequence: reset to index.html, navigate to spa.html alone, reset, navigate to
  spa.html with wait_for "Showing 50 of 50 items" (the rows navigate_only / navigate_wait_for);
- element lists: the 200-element page, and the SPA's elements and text;
- a click by ref on the SPA ("Sort by price") until the page settled (the row click_sort);
- where B has it, reading the network log of a page that made 200 requests (network_200);
- typing into the SPA's search box, a viewport screenshot plain and annotated, navigating to the
  static article, a new tab, the login form's two fields typed (the rows of scripts/bench that
  compare these with the peer).

    python3 bench/ab.py --a /tmp/webpilot-old --b target/release/webpilot --rounds 2 --reps 15
    # the same binary with and without a setting: a configuration file for one side
    python3 bench/ab.py --a target/release/webpilot --a-config off.toml --b target/release/webpilot
    # where B's time goes, stage by stage (the service's Server-Timing header)
    python3 bench/ab.py --b target/release/webpilot --rounds 1 --reps 10 --explain

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


# A page whose script makes 200 requests, each answered by the fixture server.
MANY_REQUESTS = (b"<!doctype html><title>Many</title><p id=state>Loading</p><script>"
                 b"Promise.all(Array.from({length: 200}, (_, i) => fetch('/index.html?n=' + i)))"
                 b".then(() => { document.getElementById('state').textContent = 'Fetched 200'; });"
                 b"</script>")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/many.html":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(MANY_REQUESTS)))
            self.end_headers()
            self.wfile.write(MANY_REQUESTS)
            return
        super().do_GET()


def serve_fixtures() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=FIXTURES))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(binary: str, extra: list[str], allow: str = "127.0.0.1", prefix: str = "wp-ab-", log=None):
    """Starts `webpilot serve` on a free port with a fresh data dir; returns (process, port,
    data dir) once /healthz answers."""
    port = free_port()
    data = tempfile.mkdtemp(prefix=prefix)
    out = log if log is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [binary, *extra, "--port", str(port), "--data-dir", data, "--fetch-allow", allow, "serve"],
        stdout=out, stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            probe.request("GET", "/healthz")
            probe.getresponse().read()
            return proc, port, data
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"webpilot serve did not come up (data dir {data})")
            time.sleep(0.1)


class Service:
    """One webpilot process and a keep-alive connection to it."""

    def __init__(self, binary: str, config: str | None = None):
        extra = ["--config", config] if config else []
        self.proc, self.port, self.data = start_service(binary, extra)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.last_timing: dict[str, float] = {}

    def call(self, tool: str, args: dict) -> tuple[float, dict]:
        start = time.perf_counter()
        self.conn.request("POST", f"/api/tools/{tool}", json.dumps(args), {"content-type": "application/json"})
        response = self.conn.getresponse()
        body = json.loads(response.read())
        self.last_timing = parse_server_timing(response.getheader("server-timing") or "")
        if "error" in body:
            raise RuntimeError(f"{tool} {args}: {body['error']}")
        return (time.perf_counter() - start) * 1000, body

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def parse_server_timing(header: str) -> dict[str, float]:
    """`total;dur=40.0, cdp-capturing;dur=32.0;desc="x2"` → {"total": 40.0, "cdp-capturing": 32.0,
    "cdp-capturing calls": 2}."""
    stages: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in header.split(","))):
        name, *params = part.split(";")
        for param in params:
            key, _, value = param.partition("=")
            if key == "dur":
                stages[name] = float(value)
            elif key == "desc" and value.strip('"').startswith("x"):
                stages[f"{name} calls"] = float(value.strip('"')[1:])
        stages.setdefault(f"{name} calls", 1.0)
    return stages


def measure(binary: str, config: str | None, base: str, reps: int, warmup: int = 2) -> dict[str, list]:
    """Each measure's times, and under `(name, "stages")` the server's stages of each timed call
    (the last call of a measure that makes several)."""
    service = Service(binary, config)
    times: dict = {}

    def keep(i: int, name: str, ms: float):
        if i >= warmup:
            times.setdefault(name, []).append(ms)
            times.setdefault((name, "stages"), []).append(service.last_timing)

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
        service.call("browser_navigate", {"target": f"{base}/spa.html", "wait_for": SPA_READY})
        lines = service.call("browser_read", {"mode": "elements", "max_tokens": 100000})[1]["content"].splitlines()
        sort = next(int(line[1:line.index("]")]) for line in lines if 'button "Sort by price"' in line)
        for i in range(reps + warmup):
            keep(i, "click_sort", service.call("browser_interact", {"action": "click", "ref": sort})[0])
        service.call("browser_navigate", {"target": f"{base}/elements.html", "max_tokens": 0})
        for i in range(reps + warmup):
            keep(i, "elements_200", service.call("browser_read", {"mode": "elements", "max_tokens": 100000})[0])
        service.call("browser_navigate", {"target": f"{base}/many.html", "wait_for": "Fetched 200", "max_tokens": 0})
        for i in range(reps + warmup):
            try:
                ms, body = service.call("browser_read", {"mode": "network", "max_tokens": 100000})
            except RuntimeError:
                break  # a binary without the network log
            if body.get("total", 0) < 200:
                print(f"network_200: {binary} listed {body.get('total')} requests (capture off?), not timed")
                break
            keep(i, "network_200", ms)
        measure_actions(service, base, reps, warmup, keep)
    finally:
        service.stop()
    return times


def ref_in(service: Service, role_name: str) -> int:
    lines = service.call("browser_read", {"mode": "elements", "max_tokens": 100000})[1]["content"].splitlines()
    return next(int(line[1:line.index("]")]) for line in lines if role_name in line)


def measure_actions(service: Service, base: str, reps: int, warmup: int, keep) -> None:
    """The rows scripts/bench compares with the peer: typing, screenshots, a static article, a new
    tab, the login form filled."""
    service.call("browser_navigate", {"target": f"{base}/spa.html", "wait_for": SPA_READY})
    search = ref_in(service, 'searchbox "Search items"')
    for i in range(reps + warmup):
        keep(i, "type_search", service.call("browser_interact", {"action": "type", "ref": search,
                                                                  "text": f"Item {i % 9}"})[0])
    for i in range(reps + warmup):
        keep(i, "screenshot", service.call("browser_screenshot", {})[0])
        keep(i, "screenshot_annotated", service.call("browser_screenshot", {"annotate": True})[0])
    for i in range(reps + warmup):
        keep(i, "navigate_article", service.call("browser_navigate", {"target": f"{base}/article.html"})[0])
    for i in range(reps + warmup):
        ms, body = service.call("browser_tabs", {"action": "new", "url": f"{base}/index.html"})
        keep(i, "tab_new", ms)
        service.call("browser_tabs", {"action": "close", "tab": body["tab"]})
    service.call("browser_navigate", {"target": f"{base}/login.html"})
    user, password = ref_in(service, "Username"), ref_in(service, "Password")
    for i in range(reps + warmup):
        start = time.perf_counter()
        service.call("browser_interact", {"action": "type", "ref": user, "text": "alice"})
        service.call("browser_interact", {"action": "type", "ref": password, "text": "wonderland"})
        keep(i, "login_fill", (time.perf_counter() - start) * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", help="the binary before the change (none: B alone, e.g. with --explain)")
    ap.add_argument("--b", required=True, help="the binary after the change")
    ap.add_argument("--a-config", help="a configuration file for A (webpilot --config)")
    ap.add_argument("--b-config", help="a configuration file for B")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running A then B")
    ap.add_argument("--reps", type=int, default=15, help="timed repetitions per binary per round")
    ap.add_argument("--explain", action="store_true",
                    help="after the table, where B's time goes per measure (its Server-Timing stages)")
    args = ap.parse_args()

    base = serve_fixtures()
    results: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for _ in range(args.rounds):
        for label, binary, config in (("A", args.a, args.a_config), ("B", args.b, args.b_config)):
            if not binary:
                continue
            for name, values in measure(binary, config, base, args.reps).items():
                results[label].setdefault(name, []).extend(values)

    print(f"| measure (ms, median of {args.rounds}×{args.reps}) | A | B | B vs A |")
    print("| --- | --- | --- | --- |")
    for name in dict.fromkeys(n for n in [*results["A"], *results["B"]] if isinstance(n, str)):
        a_values, b_values = results["A"].get(name), results["B"].get(name)
        a = statistics.median(a_values) if a_values else None
        b = statistics.median(b_values) if b_values else None
        change = f"{100 * (b / a - 1):+.1f} %" if a and b else "–"
        shown = lambda v: f"{v:.1f}" if v is not None else "–"
        print(f"| {name} | {shown(a)} | {shown(b)} | {change} |")
    if args.explain:
        explain(results["B"])


def explain(results: dict):
    """Per measure: the client's median, the server's (`total`), what lies between (HTTP, JSON),
    and each stage's median ms and calls per timed call, largest first. Stages that run side by
    side each count their own time."""
    for name, values in results.items():
        if not isinstance(name, str) or not results.get((name, "stages")):
            continue
        stages = results[(name, "stages")]
        med = lambda key: statistics.median(s.get(key, 0.0) for s in stages)
        client, server = statistics.median(values), med("total")
        print(f"\n{name}: client {client:.1f} ms, server {server:.1f} ms, between {client - server:.1f} ms")
        keys = {k for s in stages for k in s if not k.endswith(" calls") and k != "total"}
        for key in sorted(keys, key=med, reverse=True):
            print(f"  {key:<40} {med(key):7.1f} ms  x{med(key + ' calls'):g}")


if __name__ == "__main__":
    main()
