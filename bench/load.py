#!/usr/bin/env python3
"""Under load: many sessions starting at once on one webpilot (and one Chromium).

A flow is: navigate to a light local page (fixtures/light.html), read its elements, click
"Count up", read the text again, each in a session of its own. Measured, in one run:

  * 50 flows one after another (serial) and 50 flows started at once (burst), ROUNDS times
    alternately: total times, their ratio (burst / serial, the target is at most 3x), errors,
    navigate p50/p95 in the burst;
  * the browser's memory (PSS, from /metrics) before any burst and after each round's sessions
    are closed (the first burst raises the browser process's heap once, to a level later rounds
    come back to), and the pages Chromium still has that no session holds (strays);
  * 100 sessions requested at once with max_sessions = 64: how many ran, were refused (LIMIT,
    and how fast), timed out;
  * on a second service with browser_recycle_idle_secs = 3: PSS of the browser after one flow,
    then after a burst whose sessions are closed and the unused browser recycled, after one
    flow again.

  python3 bench/load.py --bin target/release/webpilot
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.server
import json
import os
import re
import socketserver
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extraction import start_webpilot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
SESSIONS = 50
ROUNDS = 3
MAX_SESSIONS = 64
REQUESTED = 100
# A new session costs Chromium about a second of CPU (a renderer process starts), so fifty of
# them on two cores take half a minute whatever the order: the callers say they can wait.
NAVIGATE_TIMEOUT_MS = 60_000


def log(*args):
    print("[load]", *args, file=sys.stderr, flush=True)


class FixtureHandler(http.server.SimpleHTTPRequestHandler):
    """fixtures/ as files, plus /status/<code> (what light.html fetches)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=FIXTURES, **kwargs)

    def do_GET(self):
        if self.path.startswith("/status/"):
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def serve_fixtures() -> str:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), FixtureHandler)
    server.daemon_threads = True
    server.request_queue_size = 256
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def request(method: str, url: str, body: dict | None = None) -> tuple[int, dict | str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=180) as response:
            text = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        status = error.code
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def tool(api: str, name: str, args: dict) -> tuple[int, dict]:
    return request("POST", f"{api}/api/tools/{name}", args)


def flow(api: str, session: str, page: str) -> dict:
    """One flow; returns its navigate time, total time and the first error."""
    started = time.perf_counter()
    status, nav = tool(api, "browser_navigate", {"session": session, "target": page, "max_tokens": 0,
                                                 "timeout_ms": NAVIGATE_TIMEOUT_MS})
    navigate_s = time.perf_counter() - started
    if status != 200:
        return {"error": nav.get("error", {}).get("code", status), "navigate_s": navigate_s}
    status, read = tool(api, "browser_read", {"session": session, "mode": "elements"})
    if status != 200:
        return {"error": read.get("error", {}).get("code", status), "navigate_s": navigate_s}
    match = re.search(r"\[(\d+)\][^\n]*Count up", read["content"])
    if not match:
        return {"error": "no button", "navigate_s": navigate_s}
    status, click = tool(api, "browser_interact", {"session": session, "action": "click", "ref": int(match.group(1))})
    if status != 200:
        return {"error": click.get("error", {}).get("code", status), "navigate_s": navigate_s}
    status, text = tool(api, "browser_read", {"session": session, "mode": "text"})
    if status != 200 or "Clicks: 1" not in text.get("content", ""):
        return {"error": text.get("error", {}).get("code", "no click seen"), "navigate_s": navigate_s}
    return {"error": None, "navigate_s": navigate_s, "queued_ms": nav.get("queued_ms", 0),
            "total_s": time.perf_counter() - started}


def close_all(api: str) -> None:
    _, listed = request("GET", f"{api}/api/sessions")
    for session in listed["sessions"]:
        request("DELETE", f"{api}/api/sessions/{session['session']}")


def metrics(api: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{api}/metrics", timeout=30) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("webpilot_browser_"):
            name, _, value = line.partition(" ")
            values[name] = float(value)
    return values


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def run_serial(api: str, page: str, tag: str) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    results = [flow(api, f"serial-{tag}-{i}", page) for i in range(SESSIONS)]
    seconds = time.perf_counter() - started
    close_all(api)
    return seconds, results


def run_burst(api: str, page: str, tag: str, count: int = SESSIONS) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        results = list(pool.map(lambda i: flow(api, f"burst-{tag}-{i}", page), range(count)))
    return time.perf_counter() - started, results


def settled_memory(api: str, deadline_s: float = 30) -> dict[str, float]:
    """/metrics once the browser's PSS has stopped falling (two readings a second apart within
    2 %), or at the deadline."""
    started = time.perf_counter()
    previous = metrics(api)
    while True:
        time.sleep(1)
        values = metrics(api)
        now, before = values["webpilot_browser_pss_bytes"], previous["webpilot_browser_pss_bytes"]
        if abs(now - before) <= 0.02 * before or time.perf_counter() - started > deadline_s:
            values["settle_s"] = time.perf_counter() - started
            return values
        previous = values


def recycle_phase(binary: str, page: str) -> dict:
    """A service that closes its browser 3 s after the last session: memory before a burst and
    after it, each measured after one flow on the (fresh) browser."""
    os.environ["WEBPILOT_BROWSER_RECYCLE_IDLE_SECS"] = "3"
    with tempfile.TemporaryDirectory() as data_dir:
        proc, api = start_webpilot(binary, data_dir)
        try:
            def after_one_flow(name: str) -> float:
                assert flow(api, name, page)["error"] is None
                return settled_memory(api)["webpilot_browser_pss_bytes"]

            before = after_one_flow("before")
            run_burst(api, page, "recycle")
            close_all(api)
            started = time.perf_counter()
            while metrics(api)["webpilot_browser_recycled_total"] < 1 and time.perf_counter() - started < 60:
                time.sleep(0.5)
            recycled = metrics(api)["webpilot_browser_recycled_total"]
            after = after_one_flow("after")
            close_all(api)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {"pss_before_mib": round(before / 2**20, 1), "pss_after_mib": round(after / 2**20, 1),
            "recycled": int(recycled)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "webpilot"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/load.json")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    page = serve_fixtures() + "/light.html"
    os.environ["WEBPILOT_MAX_SESSIONS"] = str(MAX_SESSIONS)
    # The rounds show what one long-lived browser does with its memory.
    os.environ["WEBPILOT_BROWSER_RECYCLE_IDLE_SECS"] = "0"
    rounds = []
    with tempfile.TemporaryDirectory() as data_dir:
        proc, api = start_webpilot(args.bin, data_dir)
        try:
            warm = flow(api, "warm-up", page)
            assert warm["error"] is None, warm
            close_all(api)
            cold = settled_memory(api)["webpilot_browser_pss_bytes"]
            log(f"browser PSS before any burst: {cold / 2**20:.0f} MiB")
            after_rounds = []
            for number in range(args.rounds):
                serial_s, serial = run_serial(api, page, str(number))
                burst_s, burst = run_burst(api, page, str(number))
                navigate = [r["navigate_s"] for r in burst]
                errors = [r["error"] for r in serial + burst if r["error"]]
                rounds.append({"serial_s": round(serial_s, 2), "burst_s": round(burst_s, 2),
                               "ratio": round(burst_s / serial_s, 2), "errors": errors,
                               "burst_navigate_p50_s": round(percentile(navigate, 0.5), 2),
                               "burst_navigate_p95_s": round(percentile(navigate, 0.95), 2),
                               "burst_queued_max_ms": max(r.get("queued_ms") or 0 for r in burst)})
                close_all(api)
                after = settled_memory(api)
                after_rounds.append(after["webpilot_browser_pss_bytes"])
                rounds[-1]["pss_after_close_mib"] = round(after_rounds[-1] / 2**20, 1)
                log(json.dumps(rounds[-1]))
            strays = after["webpilot_browser_pages"] - after["webpilot_browser_tabs"]

            started = time.perf_counter()

            def one(i: int) -> tuple[int, str, float]:
                asked = time.perf_counter()
                status, body = tool(api, "browser_navigate", {"session": f"many-{i}", "target": page, "max_tokens": 0,
                                                              "timeout_ms": 120_000})
                code = "OK" if status == 200 else body.get("error", {}).get("code", str(status))
                return status, code, time.perf_counter() - asked

            with concurrent.futures.ThreadPoolExecutor(max_workers=REQUESTED) as pool:
                answers = list(pool.map(one, range(REQUESTED)))
            many_s = time.perf_counter() - started
            codes = {code: sum(1 for _, c, _ in answers if c == code) for code in {c for _, c, _ in answers}}
            limit_times = [t for _, c, t in answers if c == "LIMIT"]
            close_all(api)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    recycled = recycle_phase(args.bin, page)
    ratios = [r["ratio"] for r in rounds]
    result = {
        "sessions": SESSIONS, "rounds": rounds,
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "errors": sum(len(r["errors"]) for r in rounds),
        "pss_cold_mib": round(cold / 2**20, 1),
        "pss_after_first_round_mib": round(after_rounds[0] / 2**20, 1),
        "pss_after_last_round_mib": round(after_rounds[-1] / 2**20, 1),
        "stray_pages": strays,
        "recycle": recycled,
        "many": {"requested": REQUESTED, "max_sessions": MAX_SESSIONS, "codes": codes, "seconds": round(many_s, 2),
                 "limit_answer_max_ms": round(1000 * max(limit_times), 1) if limit_times else None},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    json.dump(result, open(args.out, "w"), indent=2)
    log(json.dumps(result))
    spread = f"median {result['ratio_median']}x (min {result['ratio_min']}, max {result['ratio_max']}, {len(rounds)} rounds)"
    burst_p95 = max(r["burst_navigate_p95_s"] for r in rounds)
    print(f"| {SESSIONS} sessions at once vs one after another | burst/serial {spread}; "
          f"{result['errors']} errors; navigate p95 in the burst ≤ {burst_p95} s |")
    print(f"| browser memory once the sessions are closed | PSS {result['pss_cold_mib']} MiB cold, "
          f"{result['pss_after_first_round_mib']} MiB after round 1, {result['pss_after_last_round_mib']} MiB after "
          f"round {len(rounds)}; {strays:.0f} stray pages |")
    print(f"| the same with browser_recycle_idle_secs 3 | PSS {recycled['pss_before_mib']} MiB after one flow, "
          f"{recycled['pss_after_mib']} MiB after a burst of {SESSIONS}, its sessions closed, the browser recycled "
          f"({recycled['recycled']}) and one flow again |")
    print(f"| {REQUESTED} sessions at once, max_sessions {MAX_SESSIONS} | {codes} ; LIMIT answered within "
          f"{result['many']['limit_answer_max_ms']} ms |")


if __name__ == "__main__":
    main()
