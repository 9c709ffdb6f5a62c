#!/usr/bin/env python3
"""Replay performance of record-and-replay: an agent's recorded run, its replay, its Playwright export.

Each round, on one running webpilot (REST) and a shop fixture served here (bench/fixtures/replay_shop,
an SPA on 127.0.0.1 with its card form in a frame of another site, localhost):
1. records an agent's run without a model: 10 state-changing steps (navigate; type user, type
   password, click Sign in; type a search, click Search; click Add to cart; click Checkout; type
   the card number in the frame; click Pay), each action after a `browser_read mode=elements` that
   finds the element's ref by its label (reads repeat briefly until the late frame lists it);
2. fetches the session's trace and replays it with POST /api/replays on the same server, following
   GET /api/replays/{id}/events to `done`;
3. replays it with the CLI (`webpilot replay run.zip`, its own process and Chromium), for reference;
4. exports it (`webpilot replay --export playwright`) and runs the spec with Playwright Test on
   Debian's Chromium (JSON reporter), as tests/common/node.rs does.
Every run must pay (the fixture server counts the payments) and pass, or the bench stops; the
replays and the spec also expect the page's "Order confirmed" at the end.

Measures: recorded = sum of the trace's step `elapsed_ms` (reads included; and the 10 actions
alone), replay = the replay report's `elapsed_ms` (its session opened and closed included),
Playwright = the test's duration from the JSON reporter: the test's own time slot, so its context
and page are set up and closed in it but the worker's browser launch is not.

    python3 bench/replay.py                      # 5 rounds, /tmp/reltime/release/webpilot
    python3 bench/replay.py --rounds 3 --binary target/release/webpilot --no-cli
    # without the trace's step pictures (a file with `[trace]` and `screenshot_quality = 0`)
    python3 bench/replay.py --config /tmp/noshots.toml --no-playwright
"""
from __future__ import annotations

import argparse
import base64
import http.client
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab import start_service  # noqa: E402  (bench/ab.py: the existing bench's helpers)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "bench", "fixtures", "replay_shop")
PW_HOME = os.path.join(REPO, "target", "pw-node")
PW_CLI = os.path.join(PW_HOME, "node_modules", "@playwright", "test", "cli.js")

USER, PASSWORD, QUERY, CARD = "ann", "correct-horse-42", "lamp", "4242424242424242"
DONE_TEXT = "Order confirmed"
SECRET_NAME = "password"  # webpilot names a typed password after its field
# The agent's plan: (action, the element's label in the element list, text to type).
PLAN = [
    ("type", 'textbox "User"', USER),
    ("type", 'textbox "Password"', PASSWORD),
    ("click", 'button "Sign in"', None),
    ("type", 'searchbox "Search products"', QUERY),
    ("click", 'button "Search"', None),
    ("click", 'button "Add Desk lamp to cart"', None),
    ("click", 'button "Checkout"', None),
    ("type", 'textbox "Card number"', CARD),
    ("click", 'button "Pay"', None),
]
ACTIONS = 1 + len(PLAN)  # the navigation and the plan

# ---------------------------------------------------------------------------------------------
# The shop's server: static files and a few JSON endpoints, deterministic (counters only).

CATALOG = [
    {"id": "p1", "name": "Desk lamp", "price": 3900},
    {"id": "p2", "name": "Floor lamp", "price": 8900},
    {"id": "p3", "name": "Lamp shade", "price": 1500},
    {"id": "p4", "name": "Notebook", "price": 450},
]


class Shop:
    def __init__(self):
        self.lock = threading.Lock()
        self.tokens: dict[str, dict] = {}
        self.orders: dict[str, dict] = {}
        self.payments: list[tuple[str, str]] = []  # (order, card)
        self.counter = 0

    def next(self) -> int:
        self.counter += 1
        return self.counter

    def paid(self) -> int:
        with self.lock:
            return sum(1 for _, card in self.payments if card == CARD)


SHOP = Shop()


class ShopHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=FIXTURE, **kwargs)

    def log_message(self, *args):
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def reply(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def user(self):
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        return SHOP.tokens.get(token)

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/favicon.ico":
            return self.reply(404, {"error": "none"})
        if not url.path.startswith("/api/"):
            return super().do_GET()
        with SHOP.lock:
            if url.path == "/api/session":
                return self.reply(200, {"signed_in": False})
            if url.path == "/api/search":
                if not self.user():
                    return self.reply(401, {"error": "sign in first"})
                q = query.get("q", "").lower()
                return self.reply(200, {"items": [i for i in CATALOG if q and q in i["name"].lower()]})
            if url.path == "/api/pay/intent":
                order = SHOP.orders.get(query.get("order", ""))
                if not order:
                    return self.reply(404, {"error": "no such order"})
                return self.reply(200, {"intent": f"pi_{query['order']}", "amount": order["total"]})
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self.reply(400, {"error": "bad json"})
        with SHOP.lock:
            if url.path == "/api/login":
                if body.get("user") != USER or body.get("password") != PASSWORD:
                    return self.reply(401, {"error": "wrong user or password"})
                token = f"t{SHOP.next()}"
                SHOP.tokens[token] = {"name": body["user"].capitalize(), "cart": []}
                return self.reply(200, {"token": token, "name": SHOP.tokens[token]["name"]})
            user = self.user()
            if url.path == "/api/cart" and user:
                item = next((i for i in CATALOG if i["id"] == body.get("id")), None)
                if not item:
                    return self.reply(404, {"error": "no such product"})
                user["cart"].append(item)
                return self.reply(200, {"items": user["cart"], "count": len(user["cart"]),
                                        "total": sum(i["price"] for i in user["cart"])})
            if url.path == "/api/checkout" and user:
                if not user["cart"]:
                    return self.reply(400, {"error": "the cart is empty"})
                order = f"A-{1000 + SHOP.next()}"
                total = sum(i["price"] for i in user["cart"])
                SHOP.orders[order] = {"total": total, "paid": False}
                return self.reply(200, {"order": order, "count": len(user["cart"]), "total": total})
            if url.path == "/api/pay":
                order = SHOP.orders.get(body.get("order", ""))
                card = str(body.get("card", ""))
                if not order or order["paid"] or body.get("intent") != f"pi_{body.get('order')}":
                    return self.reply(400, {"error": "no payable order"})
                if not (card.isdigit() and len(card) == 16):
                    return self.reply(402, {"error": "card declined"})
                order["paid"] = True
                SHOP.payments.append((body["order"], card))
                return self.reply(200, {"order": body["order"]})
            if url.path in ("/api/cart", "/api/checkout"):
                return self.reply(401, {"error": "sign in first"})
        self.reply(404, {"error": "not found"})


def serve_shop() -> int:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ShopHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


# ---------------------------------------------------------------------------------------------
# webpilot over REST (the pattern of bench/ab.py's Service, with the frame's site allowed too).

class Failure(RuntimeError):
    pass


class Service:
    def __init__(self, binary: str, config: list[str]):
        self.log = tempfile.NamedTemporaryFile(prefix="wp-replay-serve-", suffix=".log", delete=False)
        try:
            self.proc, self.port, self.data = start_service(
                binary, config, allow="127.0.0.1,localhost", prefix="wp-replay-bench-", log=self.log)
        except RuntimeError as error:
            raise Failure(f"{error}; see {self.log.name}") from error
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body) if body is not None else None
        headers = {"content-type": "application/json"} if body is not None else {}
        self.conn.request(method, path, data, headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def call(self, tool: str, args: dict) -> dict:
        status, raw = self.request("POST", f"/api/tools/{tool}", args)
        body = json.loads(raw)
        if status != 200 or "error" in body:
            raise Failure(f"{tool} {args}: {status} {body.get('error', body)}")
        return body

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


def ref_of(lines: list[str], label: str) -> int | None:
    line = next((line for line in lines if label in line), None)
    return int(line[1:line.index("]")]) if line else None


def record(service: Service, session: str, base: str) -> bytes:
    """The agent's run: read the elements, act on the one with the label; the session's trace."""
    service.call("browser_navigate", {"session": session, "target": f"{base}/"})
    for action, label, text in PLAN:
        deadline = time.monotonic() + 10
        while True:
            read = service.call("browser_read", {"session": session, "mode": "elements", "max_tokens": 100000})
            ref = ref_of(read.get("content", "").splitlines(), label)
            if ref is not None:
                break
            if time.monotonic() > deadline:
                raise Failure(f"recording: no {label} in the element list:\n{read.get('content')}")
            time.sleep(0.05)
        args = {"session": session, "action": action, "ref": ref}
        if text is not None:
            args["text"] = text
        service.call("browser_interact", args)
    status, zip_bytes = service.request("GET", f"/api/sessions/{session}/trace")
    if status != 200:
        raise Failure(f"trace of {session}: {status} {zip_bytes[:200]!r}")
    service.request("DELETE", f"/api/sessions/{session}")
    return zip_bytes


def trace_steps(zip_bytes: bytes) -> list[dict]:
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as z:
        name = next(n for n in z.namelist() if n.endswith("trace.jsonl"))
        return [json.loads(line) for line in z.read(name).decode().splitlines() if line.strip()]


def replay_rest(service: Service, zip_bytes: bytes, base: str) -> dict:
    status, raw = service.request("POST", "/api/replays", {
        "trace": base64.b64encode(zip_bytes).decode(), "base_url": base,
        "secrets": {SECRET_NAME: PASSWORD}, "expect_text": [DONE_TEXT]})
    created = json.loads(raw)
    if status not in (200, 202) or "id" not in created:
        raise Failure(f"POST /api/replays: {status} {created}")
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=120)
    conn.request("GET", f"/api/replays/{created['id']}/events")
    response = conn.getresponse()
    event, report = None, None
    for raw_line in response:  # SSE: "event: …", "data: …", blank line
        line = raw_line.decode().rstrip("\r\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event == "done":
            report = json.loads(line[5:].strip())
            break
    conn.close()
    if report is None:
        raise Failure(f"replay {created['id']}: the stream ended without `done`")
    return report


def replay_cli(binary: str, config: list[str], zip_path: str, base: str) -> tuple[dict, float]:
    data = tempfile.mkdtemp(prefix="wp-replay-cli-")
    try:
        start = time.perf_counter()
        out = subprocess.run(
            [binary, *config, "--data-dir", data, "--fetch-allow", "127.0.0.1,localhost", "replay", zip_path,
             "--base-url", base, "--secret", f"{SECRET_NAME}={PASSWORD}", "--expect-text", DONE_TEXT],
            capture_output=True, env={**os.environ, "TMPDIR": data}, timeout=300)
        wall = (time.perf_counter() - start) * 1000
        try:
            report = json.loads(out.stdout)
        except ValueError:
            raise Failure(f"CLI replay: exit {out.returncode}, no report:\n{out.stderr.decode()[-2000:]}")
        if out.returncode != 0:
            report["passed"] = False
        return report, wall
    finally:
        shutil.rmtree(data, ignore_errors=True)


PW_CONFIG = """import { defineConfig } from '@playwright/test';
export default defineConfig({ testDir: '.', outputDir: 'results', timeout: 60000, workers: 1,
  use: { headless: true, launchOptions: { executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--no-proxy-server', '--disable-background-networking'] } } });
"""
# Beside the JSON reporter (whose steps hold only test.step), the span of the test body alone:
# from the end of its Before Hooks (context and page created) to the start of its After Hooks.
PW_BODY_REPORTER = """const fs = require('fs');
module.exports = class {
  onTestEnd(test, result) {
    const hook = (title) => result.steps.find((s) => s.category === 'hook' && s.title === title);
    const before = hook('Before Hooks'), after = hook('After Hooks');
    const end = before ? before.startTime.getTime() + before.duration : result.startTime.getTime();
    const body = after ? after.startTime.getTime() - end : null;
    fs.writeFileSync(process.env.BENCH_BODY_FILE, JSON.stringify({ body }));
  }
};
"""


def export_spec(binary: str, zip_path: str, base: str) -> str:
    data = tempfile.mkdtemp(prefix="wp-replay-export-")
    try:
        out = subprocess.run(
            [binary, "--data-dir", data, "replay", "--export", "playwright", zip_path, "--base-url", base,
             "--expect-text", DONE_TEXT], capture_output=True, timeout=60)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    if out.returncode != 0:
        raise Failure(f"export: exit {out.returncode}: {out.stderr.decode()[-2000:]}")
    return out.stdout.decode()


def run_playwright(spec: str) -> tuple[float, float | None]:
    """The test's duration as the JSON reporter gives it (the test's own time slot: context and
    page set up and closed, the body; not the worker's browser launch), and the body alone."""
    folder = tempfile.mkdtemp(prefix="bench-replay-", dir=PW_HOME)
    try:
        for name, text in (("exported.spec.ts", spec), ("playwright.config.ts", PW_CONFIG),
                           ("body-reporter.cjs", PW_BODY_REPORTER)):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        body_file = os.path.join(folder, "body.json")
        out = subprocess.run(
            ["node", PW_CLI, "test", "--config", os.path.join(folder, "playwright.config.ts"),
             "--reporter=json,./body-reporter.cjs"], cwd=folder, capture_output=True, timeout=300,
            env={**os.environ, f"WEBPILOT_SECRET_{SECRET_NAME.upper()}": PASSWORD, "BENCH_BODY_FILE": body_file})
        body = None
        if os.path.exists(body_file):
            with open(body_file) as f:
                body = json.load(f)["body"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        report = json.loads(out.stdout)
    except ValueError:
        raise Failure(f"Playwright: exit {out.returncode}, no JSON report:\n{out.stderr.decode()[-2000:]}")
    results = [r for s in walk_suites(report.get("suites", [])) for t in s["tests"] for r in t["results"]]
    if out.returncode != 0 or len(results) != 1 or results[0]["status"] != "passed":
        errors = [e.get("message", "") for r in results for e in r.get("errors", [])]
        raise Failure(f"Playwright run failed (exit {out.returncode}): {errors or report.get('errors')}")
    return results[0]["duration"], body


def walk_suites(suites):
    for suite in suites:
        yield from suite.get("specs", [])
        yield from walk_suites(suite.get("suites", []))


# ---------------------------------------------------------------------------------------------

def is_action(step: dict) -> bool:
    return step["tool"] in ("browser_navigate", "browser_interact")


def spread(values: list[float], fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="/tmp/reltime/release/webpilot")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--config", help="a webpilot configuration file for the service and the CLI replay")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI replay (reference only)")
    ap.add_argument("--no-playwright", action="store_true")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"no binary at {args.binary} (cargo build --release --bin webpilot)")
    if not args.no_playwright and not os.path.exists(PW_CLI):
        sys.exit(f"no Playwright Test at {PW_CLI} (run the replay tests once to install it)")

    load_before = os.getloadavg()
    base = f"http://127.0.0.1:{serve_shop()}"
    config = ["--config", args.config] if args.config else []
    service = Service(args.binary, config)
    rows: dict[str, list[float]] = {}
    per_step: dict[str, tuple[list[float], list[float], list[float]]] = {}
    keep = lambda name, value: rows.setdefault(name, []).append(value)
    work = tempfile.mkdtemp(prefix="wp-replay-zip-")
    try:
        # Chromium starts with the service's first session: start it before any timed call.
        service.call("browser_navigate", {"session": "warmup", "target": f"{base}/index.html"})
        service.request("DELETE", "/api/sessions/warmup")
        for round_ in range(1, args.rounds + 1):
            paid = SHOP.paid()
            zip_bytes = record(service, f"rec-{round_}", base)
            if SHOP.paid() != paid + 1:
                raise Failure(f"round {round_}: the recorded run did not pay")
            steps = trace_steps(zip_bytes)
            actions = [s for s in steps if is_action(s)]
            if len(actions) != ACTIONS:
                raise Failure(f"round {round_}: {len(actions)} actions in the trace, not {ACTIONS}")
            keep("recorded_all", sum(s["elapsed_ms"] for s in steps))
            keep("recorded_actions", sum(s["elapsed_ms"] for s in actions))
            keep("reads", len(steps) - len(actions))

            paid = SHOP.paid()
            report = replay_rest(service, zip_bytes, base)
            if not report.get("passed") or SHOP.paid() != paid + 1:
                failed = [s for s in report.get("steps", []) if s.get("status") == "failed"]
                raise Failure(f"round {round_}: the replay did not pass / pay: {failed or report}")
            keep("replay", report["elapsed_ms"])
            replayed = [s for s in report["steps"] if s["status"] in ("passed", "healed")
                        and s["tool"] != "check"]
            if len(replayed) != ACTIONS:
                raise Failure(f"round {round_}: {len(replayed)} steps replayed, not {ACTIONS}")
            reads_before, read_ms = [], 0
            for step in steps:  # the reads the agent made before each action
                if is_action(step):
                    reads_before.append(read_ms)
                    read_ms = 0
                else:
                    read_ms += step["elapsed_ms"]
            for rec, reads, rep in zip(actions, reads_before, replayed):
                what = rep["what"].replace(base, "")
                per_step.setdefault(what, ([], [], []))
                per_step[what][0].append(rec["elapsed_ms"])
                per_step[what][1].append(reads)
                per_step[what][2].append(rep["elapsed_ms"])
            keep("replay_outside", report["elapsed_ms"] - sum(s["elapsed_ms"] for s in replayed))

            zip_path = os.path.join(work, f"run-{round_}.zip")
            with open(zip_path, "wb") as f:
                f.write(zip_bytes)
            if not args.no_cli:
                paid = SHOP.paid()
                cli_report, wall = replay_cli(args.binary, config, zip_path, base)
                if not cli_report.get("passed") or SHOP.paid() != paid + 1:
                    raise Failure(f"round {round_}: the CLI replay did not pass / pay: {cli_report}")
                keep("cli_elapsed", cli_report["elapsed_ms"])
                keep("cli_wall", wall)
            if not args.no_playwright:
                paid = SHOP.paid()
                duration, body = run_playwright(export_spec(args.binary, zip_path, base))
                if SHOP.paid() != paid + 1:
                    raise Failure(f"round {round_}: the Playwright run did not pay")
                keep("playwright", duration)
                if body is not None:
                    keep("playwright_body", body)
            done = f"round {round_}/{args.rounds}: recorded {rows['recorded_all'][-1]:.0f} ms, " \
                   f"replay {rows['replay'][-1]:.0f} ms"
            if "playwright" in rows:
                done += f", Playwright {rows['playwright'][-1]:.0f} ms"
            print(done, file=sys.stderr, flush=True)
    except Failure as error:
        sys.exit(f"FAILED: {error}")
    finally:
        service.stop()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    n = args.rounds
    ratio = lambda a, b: [x / y for x, y in zip(rows[a], rows[b])]
    print(f"replay bench: {n} rounds, {ACTIONS} actions + {spread(rows['reads'])} reads recorded; "
          f"all {n} replays passed" + ("" if args.no_playwright else f", all {n} Playwright runs passed"))
    print(f"load average 1/5/15 min: before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)} (the bench's own Chromium and node included)")
    print()
    print("| measure (ms)                           | median (min–max) |")
    print("| -------------------------------------- | ---------------- |")
    table = [
        ("recorded: all trace steps (reads too)", "recorded_all"),
        ("recorded: the 10 actions", "recorded_actions"),
        ("replay (REST, report elapsed_ms)", "replay"),
        ("  outside steps (open, check, close)", "replay_outside"),
        ("replay (CLI, report elapsed_ms)", "cli_elapsed"),
        ("replay (CLI, wall incl. start-up)", "cli_wall"),
        ("Playwright test duration (JSON)", "playwright"),
        ("  of which body (no context/page)", "playwright_body"),
    ]
    for label, key in table:
        if key in rows:
            print(f"| {label:<38} | {spread(rows[key]):<16} |")
    print()
    print("| ratio                       | median (min–max)   | target |")
    print("| --------------------------- | ------------------ | ------ |")
    ratios = [("replay / recorded (all)", "replay", "recorded_all", "≤ 0.5"),
              ("replay / recorded (actions)", "replay", "recorded_actions", ""),
              ("replay / Playwright", "replay", "playwright", "≤ 1.5")]
    for label, a, b, target in ratios:
        if b in rows:
            values = ratio(a, b)
            flag = ""
            if target:
                flag = " ok" if statistics.median(values) <= float(target.split()[-1]) else " MISSED"
            print(f"| {label:<27} | {spread(values, '{:.2f}'):<18} | {target}{flag} |")
    print()
    print("| step (ms, median)                 | recorded | reads before it | replay |")
    print("| --------------------------------- | -------- | --------------- | ------ |")
    for what, (rec, reads, rep) in per_step.items():
        print(f"| {what[:33]:<33} | {statistics.median(rec):>8.0f} | {statistics.median(reads):>15.0f} "
              f"| {statistics.median(rep):>6.0f} |")


if __name__ == "__main__":
    main()
