#!/usr/bin/env python3
"""Soak: an hour of mixed agent work on one webpilot, looking for leaks and slow-downs.

One `webpilot serve` (fresh data dir; loopback only: the fixtures here, nothing past them) and
its Chromium. WORKERS threads, each an agent with a session of its own, loop until --minutes:
navigate to a fixture page (rotating), read it (elements, find, markdown or text, network),
screenshot it (annotated every third round), act on it (type, click, select, scroll) and check
the outcome; every fifth round export the session's trace, every sixth run a crawl_batch (mode
http) polled with crawl_status until done. Every other round the reads and the screenshot go
over MCP (streamable HTTP at /mcp, an MCP session per worker on the same browser session). An
HTTP status >= 400, an `error` body, an MCP error or an exception is an error; the first few are
kept with their operation.

Every SAMPLE_SECS: the service's RSS, open files and threads, the PSS of the Chromium processes
under it (/proc/PID/smaps_rollup), their number, a few /metrics values, each operation's
latencies. Against targets at the end: per operation, p95 of the first vs the last window (10
min, or a sixth of a shorter run; last within +20 %); RSS and PSS after the first window vs at
the end (within +10 %); open files and Chromium processes (no growth); errors (0). Then the
sessions are closed and what stays is reported. Prints a Markdown table, writes every sample to
--out and a plot of memory and p95 over time to --plot (matplotlib, installed into a venv at
/tmp/soak-venv when it is not importable). Stdlib otherwise.

  python3 bench/soak.py [--minutes 60] [--bin target/release/webpilot] [--out FILE] [--plot FILE | --no-plot]
  python3 bench/soak.py --minutes 10 --config other.toml      # soak other settings
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lifecycle import run_and_save, stop_webpilot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
VENV = "/tmp/soak-venv"
WORKERS = 8
SAMPLE_SECS = 10
WINDOW_S = 600          # first/last window; a sixth of the run when that is shorter
P95_SLACK = 1.20        # last window's p95 at most 20 % over the first's
MEMORY_SLACK = 1.10     # memory at the end at most 10 % over after the first window
KEEP_ERRORS = 10
PLOTTED_OPS = ("navigate", "read elements", "read markdown", "interact click", "interact type", "screenshot",
               "screenshot annotated", "mcp read markdown", "trace export", "crawl until done")
CRAWL_PAGES = ("article.html", "spa.html", "login.html", "form.html")
# Per page: a text to find; actions by element name (the ref comes from the element list; None
# needs no element), those that may leave the page last; a text that must be there afterwards.
PAGES = {
    "spa.html": ("Item 07", [("type", "Search items", {"text": "Blue"}), ("click", "Sort by price", {}),
                             ("click", "Reset filters", {})], "Showing 50 of 50 items"),
    "article.html": ("tidal gauges", [("type", "Search the site", {"text": "harbour"}),
                                      ("scroll", None, {"direction": "down", "amount": 1500})], None),
    "form.html": ("Attachment", [("select", "Country", {"option": "France"}), ("type", "First name", {"text": "Ada"}),
                                 ("type", "Second name", {"text": "Lovelace"}), ("click", "Send", {})],
                  "Submitted: Ada / Lovelace"),
    "elements.html": ("Link number 75", [("click", "Button 7", {}), ("type", "Field 3", {"text": "soak"}),
                                          ("scroll", None, {"direction": "down", "amount": 2000})], None),
    "light.html": ("Light counter", [("click", "Count up", {})], "Clicks: 1"),
    "login.html": ("Test account", [("type", "Username", {"text": "alice"}),
                                    ("type", "Password", {"text": "wonderland", "submit": True})], "Welcome, alice"),
}


def log(*args):
    print("[soak]", *args, file=sys.stderr, flush=True)


class FixtureHandler(http.server.SimpleHTTPRequestHandler):
    """fixtures/ as files, /status/<code> (what light.html fetches) and POST /login (login.html's form)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=FIXTURES, **kwargs)

    def answer(self, code: int, body: bytes, mime: str = "text/html; charset=utf-8"):
        self.send_response(code)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/status/"):
            return self.answer(200, b"ok", "text/plain")
        super().do_GET()

    def do_POST(self):
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        if self.path != "/login":
            return self.answer(404, b"no such route")
        if form.get("username") == ["alice"] and form.get("password") == ["wonderland"]:
            return self.answer(200, b"<!doctype html><title>Account</title><h1>Welcome, alice</h1>")
        self.answer(401, b"<!doctype html><title>Sign in</title><h1>Wrong password</h1>")

    def log_message(self, *args):
        pass


def request(api: str, method: str, path: str, body: dict | None = None,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One request on a fresh connection: (status, response headers, body)."""
    conn = http.client.HTTPConnection(*api.removeprefix("http://").split(":"), timeout=180)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


class Recorder:
    """Latencies (seconds since the start, operation, ms) and errors, shared by the workers."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.latencies: list[tuple[float, str, float]] = []
        self.errors, self.first_errors, self.closed = 0, [], False
        self.trace_bytes_max = 0
        self.blocked: dict[str, int] = {}   # what the sessions' pages were refused (past loopback), by target

    def now(self) -> float:
        return time.monotonic() - self.t0

    def ok(self, op: str, started: float):
        with self.lock:
            self.latencies.append((round(started - self.t0, 2), op, round((time.monotonic() - started) * 1000, 1)))

    def refused(self, blocked: list[dict]):
        with self.lock:
            for item in blocked:
                self.blocked[item["target"]] = self.blocked.get(item["target"], 0) + item.get("count", 1)

    def fail(self, op: str, what: str, session: str):
        with self.lock:
            if self.closed:     # a call cut by the service stopping after the run is not the run's
                return
            self.errors += 1
            if len(self.first_errors) < KEEP_ERRORS:
                self.first_errors.append({"t": round(self.now(), 1), "op": op, "session": session, "error": what[:400]})
        log(f"error in {op} ({session}): {what[:200]}")


class Mcp:
    """One MCP session over streamable HTTP; answers come as SSE (or one JSON body)."""

    def __init__(self, api: str):
        self.api, self.session_id, self.next_id = api, None, 0

    def post(self, message: dict) -> tuple[int, dict, bytes]:
        headers = {"Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return request(self.api, "POST", "/mcp", message, headers)

    def rpc(self, method: str, params: dict) -> dict:
        self.next_id += 1
        status, headers, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if status != 200:
            raise RuntimeError(f"HTTP {status} {body[:200]!r}")
        self.session_id = self.session_id or headers.get("mcp-session-id")
        for line in body.decode().splitlines():
            try:
                message = json.loads(line.removeprefix("data:").strip())
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == self.next_id:
                return message
        raise RuntimeError(f"no answer to {method} in {body[:200]!r}")

    def open(self):
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "webpilot-soak", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self):
        if self.session_id:
            request(self.api, "DELETE", "/mcp", headers={"Mcp-Session-Id": self.session_id})


class Agent(threading.Thread):
    """One worker: its own browser session (and MCP session), looping over the pages until stopped."""

    def __init__(self, number: int, api: str, site: str, rec: Recorder, stop: threading.Event):
        super().__init__(daemon=True, name=f"soak-{number}")
        self.number, self.api, self.site, self.rec, self.stop = number, api, site, rec, stop
        self.session = f"soak-{number}"
        self.mcp = Mcp(api)

    def tool(self, op: str, name: str, args: dict, via_mcp: bool = False, record: bool = True) -> dict | None:
        """Calls a tool; its parsed result, or None after counting an error."""
        if name.startswith("browser_"):     # the crawl tools have no session
            args = {"session": self.session, **args}
        started = time.monotonic()
        try:
            if via_mcp:
                message = self.mcp.rpc("tools/call", {"name": name, "arguments": args})
                result = message.get("result") or {}
                if "error" in message or result.get("isError"):
                    text = "".join(c.get("text", "") for c in result.get("content", []))
                    return self.rec.fail(op, json.dumps(message.get("error")) if "error" in message else text,
                                         self.session)
                body = result.get("structuredContent") or {}
            else:
                status, _, raw = request(self.api, "POST", f"/api/tools/{name}", args)
                body = json.loads(raw)
                if status >= 400 or "error" in body:
                    return self.rec.fail(op, f"HTTP {status} {json.dumps(body.get('error'))}", self.session)
        except Exception as error:  # noqa: BLE001 - a soak counts whatever goes wrong
            return self.rec.fail(op, f"{type(error).__name__}: {error}", self.session)
        if record:
            self.rec.ok(op, started)
        self.rec.refused(body.get("blocked", []))
        return body

    def run(self):
        try:
            self.mcp.open()
        except Exception as error:  # noqa: BLE001
            self.rec.fail("mcp initialize", f"{type(error).__name__}: {error}", self.session)
        names = list(PAGES)
        rounds = 0
        while not self.stop.is_set():
            self.round(rounds, names[(self.number + rounds) % len(names)])
            rounds += 1

    def round(self, i: int, page: str):
        find, actions, expect = PAGES[page]
        mcp = i % 2 == 1
        nav = self.tool("navigate", "browser_navigate", {"target": f"{self.site}/{page}"})
        if nav is None:
            return
        if nav.get("status") != 200:
            self.rec.fail("navigate", f"{page} answered {nav.get('status')}", self.session)
        listed = self.tool("read elements", "browser_read", {"mode": "elements", "max_tokens": 8000}) or {}
        found = self.tool("read find", "browser_read", {"mode": "find", "query": find})
        if found is not None and not found.get("matches"):
            self.rec.fail("read find", f"{find!r} not found on {page}", self.session)
        mode = "markdown" if i % 4 < 2 else "text"
        self.tool(f"{'mcp ' if mcp else ''}read {mode}", "browser_read", {"mode": mode}, via_mcp=mcp)
        self.tool(f"{'mcp ' if mcp else ''}screenshot", "browser_screenshot", {}, via_mcp=mcp)
        if i % 3 == 0:
            self.tool("screenshot annotated", "browser_screenshot", {"annotate": True})
        self.tool("read network", "browser_read", {"mode": "network"})
        for action, element, extra in actions:
            args = {"action": action, **extra}
            if element:
                # '[12] textbox "First name"'
                ref = re.search(rf'^\[(\d+)\] [\w ]+ "{re.escape(element)}"', listed.get("content", ""), re.M)
                if not ref:
                    self.rec.fail(f"interact {action}", f"no {element!r} in the element list of {page}", self.session)
                    continue
                args["ref"] = int(ref.group(1))
            self.tool(f"interact {action}", "browser_interact", args)
        if expect:
            seen = self.tool("read find", "browser_read", {"mode": "find", "query": expect})
            if seen is not None and not seen.get("matches"):
                self.rec.fail("check", f"{expect!r} not on {page} after {[a for a, _, _ in actions]}", self.session)
        if i % 5 == 4:
            self.export_trace()
        if i % 6 == self.number % 6:
            self.crawl()

    def export_trace(self):
        started = time.monotonic()
        try:
            status, _, body = request(self.api, "GET", f"/api/sessions/{self.session}/trace")
        except Exception as error:  # noqa: BLE001
            return self.rec.fail("trace export", f"{type(error).__name__}: {error}", self.session)
        if status != 200 or not body.startswith(b"PK"):     # a zip file
            return self.rec.fail("trace export", f"HTTP {status} {body[:200]!r}", self.session)
        self.rec.ok("trace export", started)
        self.rec.trace_bytes_max = max(self.rec.trace_bytes_max, len(body))

    def crawl(self):
        started = time.monotonic()
        task = self.tool("crawl_batch", "crawl_batch", {"urls": [f"{self.site}/{p}" for p in CRAWL_PAGES],
                                                        "mode": "http"})
        if task is None:
            return
        while True:
            # `wait` answers as soon as the task ends: the polls' time is the crawl's, recorded below
            status = self.tool("crawl_status", "crawl_status", {"task_id": task["task_id"], "wait": 10}, record=False)
            if status is None:
                return
            if status.get("status") in ("completed", "failed", "cancelled"):
                break
            if time.monotonic() - started > 300:
                return self.rec.fail("crawl until done", f"{task['task_id']} not done after 300 s", self.session)
        if status["status"] != "completed" or status.get("errors"):
            return self.rec.fail("crawl until done", json.dumps(status)[:400], self.session)
        self.rec.ok("crawl until done", started)


def descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process under `root`, from /proc."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue    # gone meanwhile
            name = text[text.index("(") + 1:text.rindex(")")]
            ppid = int(text[text.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append((int(entry), name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def kib_field(path: str, field: str) -> int:
    """A number field of a /proc file (kB for memory)."""
    with open(path) as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field + ":"))


def sample(pid: int, api: str, rec: Recorder, window: list[tuple[float, str, float]]) -> dict:
    chromium = [p for p, name in descendants(pid) if "chrom" in name]
    pss = 0
    for child in chromium:
        try:
            pss += kib_field(f"/proc/{child}/smaps_rollup", "Pss")
        except (OSError, StopIteration):
            pass    # exited between the listing and the reading
    gauges = {}
    try:
        text = request(api, "GET", "/metrics")[2].decode()
        for name in ("browser_pages", "browser_sessions", "browser_tab_crashes_total", "browser_restarts_total",
                     "browser_stray_pages_closed_total", "egress_refused_total"):
            match = re.search(rf"^webpilot_{name} (\S+)$", text, re.M)
            gauges[name] = float(match.group(1)) if match else None
    except Exception as error:  # noqa: BLE001
        rec.fail("GET /metrics", f"{type(error).__name__}: {error}", "sampler")
    by_op: dict[str, list[float]] = {}
    for _, op, ms in window:
        by_op.setdefault(op, []).append(ms)
    return {"t": round(rec.now(), 1), "service_rss_mib": round(kib_field(f"/proc/{pid}/status", "VmRSS") / 1024, 1),
            "browser_pss_mib": round(pss / 1024, 1), "open_files": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": kib_field(f"/proc/{pid}/status", "Threads"),
            "chromium_processes": len(chromium), "errors": rec.errors, "metrics": gauges,
            "ops": {op: {"n": len(v), "p50_ms": percentile(v, 0.5), "p95_ms": percentile(v, 0.95)}
                    for op, v in sorted(by_op.items())}}


def percentile(values: list[float], share: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))] if ordered else None


def summarize(samples: list[dict], latencies: list, end_s: float, errors: int) -> list[dict]:
    """Rows of (measure, first, last, target, verdict)."""
    window = min(WINDOW_S, end_s / 6)
    rows = []
    for op in sorted({op for _, op, _ in latencies}):
        first = percentile([ms for t, o, ms in latencies if o == op and t < window], 0.95)
        last = percentile([ms for t, o, ms in latencies if o == op and t >= end_s - window], 0.95)
        verdict = "n/a" if first is None or last is None else "PASS" if last <= P95_SLACK * first else "FAIL"
        rows.append({"measure": f"p95 {op} (ms)", "first": first, "last": last, "target": "last ≤ 1.2 × first",
                     "verdict": verdict})
    # One 10 s sample is noisy (renderers and connections come and go). Memory: the median of the
    # samples within 15 s of the first window's end against that of the last three. Counts, flat
    # once every session is open: the last window's median against the first window's range.
    during = [s for s in samples if s["t"] <= end_s]
    errors_row = {"measure": "errors", "first": None, "last": errors, "target": "0",
                  "verdict": "PASS" if errors == 0 else "FAIL"}
    if not during:      # the service died at once
        return rows + [errors_row]
    live = [s for s in during if s["metrics"].get("browser_sessions") == WORKERS]
    for key, label, target in (("service_rss_mib", "service RSS (MiB)", "growth ≤ 10 %"),
                               ("browser_pss_mib", "browser PSS (MiB)", "growth ≤ 10 %"),
                               ("open_files", "service open files", "no growth (median ≤ first max)"),
                               ("threads", "service threads", "reported"),
                               ("chromium_processes", "Chromium processes", "no growth (median ≤ first max)")):
        if key.endswith("_mib"):
            first = [s[key] for s in during if abs(s["t"] - window) <= 15] or [during[0][key]]
            last = [s[key] for s in during[-3:]]
            first, last = statistics.median(first), statistics.median(last)
            verdict = "PASS" if last <= MEMORY_SLACK * first else "FAIL"
        else:
            first = [s[key] for s in live if s["t"] < window] or [s[key] for s in (live or during)[:1]]
            last = [s[key] for s in live if s["t"] >= end_s - window] or [during[-1][key]]
            # No growth: the end's typical count within what the first window saw.
            verdict = "PASS" if statistics.median(last) <= max(first) else "FAIL"
            first, last = f"{statistics.median(first):g} (max {max(first)})", statistics.median(last)
        rows.append({"measure": label, "first": first, "last": last, "target": target,
                     "verdict": "–" if target == "reported" else verdict})
    return rows + [errors_row]


def start_webpilot(binary: str, data_dir: str, config: str | None) -> tuple[subprocess.Popen, str, dict]:
    """`webpilot serve` on a free loopback port; (process, base URL, its WARN/ERROR log lines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBPILOT_")}
    # Loopback only, refused by name before any DNS lookup: Chromium's own requests made for a
    # session (autofill queries to content-autofill.googleapis.com on pages with forms) would
    # otherwise reach out, or wait on DNS in an offline sandbox. /metrics counts the refusals.
    env.update(WEBPILOT_FETCH_ALLOW="127.0.0.1", WEBPILOT_FETCH_ALLOW_DOMAINS="127.0.0.1",
               WEBPILOT_LOG="info", WEBPILOT_SHUTDOWN_GRACE_SECS="2",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    # A session of its own: Ctrl-C does not reach it (or its Chromium) before we stop it. cwd:
    # no stray webpilot.toml.
    command = [binary, "--port", "0", "--data-dir", data_dir, "serve"]
    if config:
        command[1:1] = ["--config", os.path.abspath(config)]
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no webpilot binary at {binary} (build it with cargo build --release, or pass --bin)")
    proc = subprocess.Popen(command, env=env, cwd=data_dir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    for line in proc.stderr:
        seen.append(line.strip())
        if match := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
            break
    else:
        raise SystemExit(f"webpilot did not start (exit status {proc.wait()}):\n" + "\n".join(seen[-20:]))
    logged = {"WARN": 0, "ERROR": 0, "messages": {}}

    def drain():    # and count what the service logs as WARN or ERROR, by message (time stamp cut)
        for text in proc.stderr:
            level = next((lv for lv in ("ERROR", "WARN") if f" {lv} " in text), None)
            if level:
                logged[level] += 1
                message = text[text.index(f" {level} "):].strip()[:300]
                logged["messages"][message] = logged["messages"].get(message, 0) + 1
    threading.Thread(target=drain, daemon=True).start()
    return proc, match.group(1), logged



def run(args) -> dict:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FixtureHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}"
    data_dir = tempfile.mkdtemp(prefix="webpilot-soak-")
    proc, stop, agents, interrupted = None, threading.Event(), [], False
    try:
        proc, api, logged = start_webpilot(args.bin, data_dir, args.config)
        log(f"webpilot pid {proc.pid} at {api}, fixtures at {site}, data in {data_dir}; {args.minutes:g} min")
        rec = Recorder()
        samples, seen = [], 0
        agents = [Agent(n, api, site, rec, stop) for n in range(1, WORKERS + 1)]
        for agent in agents:
            agent.start()
        deadline = args.minutes * 60
        try:
            while proc.poll() is None:
                window, seen = rec.latencies[seen:], len(rec.latencies)
                samples.append(sample(proc.pid, api, rec, window))
                last = samples[-1]
                log(f"t={last['t']:.0f}s rss={last['service_rss_mib']} pss={last['browser_pss_mib']} "
                    f"fds={last['open_files']} threads={last['threads']} chromium={last['chromium_processes']} "
                    f"calls={seen} errors={rec.errors}")
                if rec.now() >= deadline:
                    break
                time.sleep(min(SAMPLE_SECS - rec.now() % SAMPLE_SECS, deadline - rec.now() + 0.01))
        except KeyboardInterrupt:
            interrupted = True
            log("interrupted: stopping the workers, reporting what ran")
        end_s = rec.now()
        if proc.poll() is not None:
            rec.fail("service", f"webpilot exited with status {proc.returncode}", "sampler")
        stop.set()
        joined_by = time.monotonic() + (30 if interrupted else 120)     # a round ends within seconds
        for agent in agents:
            agent.join(timeout=max(0.0, joined_by - time.monotonic()))
        # Sessions closed: what Chromium keeps then is not any session's (strays, leaks).
        closed = None
        if proc.poll() is None:
            for agent in agents:
                try:
                    request(api, "DELETE", f"/api/sessions/{agent.session}")
                    agent.mcp.close()
                except Exception as error:  # noqa: BLE001
                    rec.fail("close session", f"{type(error).__name__}: {error}", agent.session)
            time.sleep(5)
            closed = sample(proc.pid, api, rec, [])
        rec.closed = True
        rows = summarize(samples, rec.latencies, end_s, rec.errors)
        return {"minutes": args.minutes, "ran_s": round(end_s, 1), "interrupted": interrupted, "workers": WORKERS,
                "cpus": os.cpu_count(), "rows": rows, "errors": rec.errors, "first_errors": rec.first_errors,
                "calls": len(rec.latencies), "trace_bytes_max": rec.trace_bytes_max, "blocked": rec.blocked,
                # a copy: what it logs while being stopped is not the run's
                "service_log": json.loads(json.dumps(logged)),
                "after_sessions_closed": closed, "samples": samples, "latencies": rec.latencies}
    finally:
        stop.set()
        if proc is not None:
            stop_webpilot(proc)
        server.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


def plot(result: dict, path: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    samples = result["samples"]
    minutes = [s["t"] / 60 for s in samples]
    fig, (memory, latency) = plt.subplots(2, 1, sharex=True, figsize=(11, 8))
    memory.set_title(f"webpilot soak: {result['workers']} sessions, {result['ran_s'] / 60:.1f} min, "
                     f"{result['calls']} calls, {result['errors']} errors")
    # Two scales: the service's tens of MiB would look flat next to Chromium's GiB.
    memory.plot(minutes, [s["service_rss_mib"] for s in samples], color="tab:blue", label="webpilot RSS")
    memory.set_ylabel("webpilot RSS (MiB)", color="tab:blue")
    memory.set_ylim(bottom=0)
    browser = memory.twinx()
    browser.plot(minutes, [s["browser_pss_mib"] for s in samples], color="tab:orange", label="Chromium PSS")
    browser.set_ylabel("Chromium PSS, all processes (MiB)", color="tab:orange")
    browser.set_ylim(bottom=0)
    # p95 per bin of a minute (of 10 s in a short run), from every call: smoother than per sample.
    bin_s = max(SAMPLE_SECS, result["ran_s"] / 60)
    for op in PLOTTED_OPS:
        bins: dict[int, list[float]] = {}
        for t, o, ms in result["latencies"]:
            if o == op and t <= result["ran_s"]:
                bins.setdefault(int(t // bin_s), []).append(ms)
        if bins:
            latency.plot([(b + 0.5) * bin_s / 60 for b in sorted(bins)],
                         [percentile(bins[b], 0.95) for b in sorted(bins)], marker=".", linewidth=1, label=op)
    latency.set_yscale("log")
    latency.set_ylabel(f"p95 per {bin_s:.0f} s (ms)")
    latency.set_xlabel("minutes")
    latency.legend(fontsize="small", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def make_plot(out: str, png: str):
    """Plots here if matplotlib is importable, else in a venv of its own (made once)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        python = os.path.join(VENV, "bin", "python")
        try:
            if not os.path.exists(python) or subprocess.run([python, "-c", "import matplotlib"]).returncode != 0:
                log(f"matplotlib is missing: installing it into {VENV}")
                subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
                subprocess.run([python, "-m", "pip", "install", "--quiet", "matplotlib"], check=True)
            subprocess.run([python, os.path.abspath(__file__), "--plot-from", out, "--plot", png], check=True)
        except (OSError, subprocess.CalledProcessError) as error:
            log(f"no plot: {error}")
            return
    else:
        plot(json.load(open(out)), png)
    log(f"plot: {png}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "webpilot"))
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--out", default="/tmp/webpilot-bench/soak.json")
    parser.add_argument("--plot", default="/tmp/webpilot-bench/soak.png")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--config", help="a webpilot.toml for the service, to soak other settings")
    parser.add_argument("--plot-from", help=argparse.SUPPRESS)     # the venv's half of make_plot
    args = parser.parse_args()
    if args.plot_from:
        return plot(json.load(open(args.plot_from)), args.plot)

    result = run_and_save(lambda: run(args), args.out, "[soak] interrupted again while stopping: "
                          "webpilot and the fixture server are stopped, nothing reported")
    if not args.no_plot:
        make_plot(args.out, args.plot)
    window = min(WINDOW_S, result["ran_s"] / 6)
    print(f"\n{WORKERS} sessions for {result['ran_s'] / 60:.1f} min{' (interrupted)' if result['interrupted'] else ''}, "
          f"{result['calls']} calls, {result['cpus']} CPUs; first/last window {window / 60:.1f} min\n")
    print("| measure | first | last | target | result |\n| --- | ---: | ---: | --- | --- |")
    for row in result["rows"]:
        print(f"| {row['measure']} | {'–' if row['first'] is None else row['first']} | "
              f"{'–' if row['last'] is None else row['last']} | {row['target']} | {row['verdict']} |")
    closed, logged = result["after_sessions_closed"], result["service_log"]
    if closed:
        print(f"\nAfter the sessions closed: service RSS {closed['service_rss_mib']} MiB, {closed['open_files']} "
              f"open files, {closed['threads']} threads; {closed['chromium_processes']} Chromium processes, PSS "
              f"{closed['browser_pss_mib']} MiB, browser pages {closed['metrics'].get('browser_pages')}; "
              f"connections refused past loopback {closed['metrics'].get('egress_refused_total')}.")
    print(f"Service log: {logged['ERROR']} errors, {logged['WARN']} warnings. Largest trace export "
          f"{result['trace_bytes_max'] / 1024:.0f} KiB. JSON: {args.out}")
    if result["blocked"]:
        print("Refused to the sessions' pages: " + ", ".join(f"{target} ×{count}" for target, count in
                                                               sorted(result["blocked"].items(), key=lambda b: -b[1])))
    for error in result["first_errors"]:
        print(f"- error at {error['t']} s in {error['op']} ({error['session']}): {error['error']}")
    for message, count in sorted(logged["messages"].items(), key=lambda m: -m[1])[:KEEP_ERRORS]:
        print(f"- service log, {count}×: {message}")


if __name__ == "__main__":
    main()
