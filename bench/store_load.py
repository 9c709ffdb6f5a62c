#!/usr/bin/env python3
"""Does the conversation store block the service's async runtime?

Target: GET /healthz p99 stays at most 20 ms while 20 chats store their conversations at once.

A stand-in OpenAI-compatible model on loopback streams every answer at once (chunks, usage,
[DONE]; a short message, no tool calls), so a turn costs little but the service's own work:
read the conversation's history, call the model, store the question and the answer. `webpilot
serve` runs on a fresh data dir (SQLite, or PostgreSQL with --database-url) with it as model.

  * idle: GET /healthz every 10 ms, one keep-alive connection, for a third of --seconds;
  * load: the same for the rest, while CHATS threads each send message after message to a
    conversation of their own (POST /api/conversations/{id}/messages: the route that stores
    turns; POST /api/chat stores nothing), reading each SSE answer to its end.

The prober and the stand-in run in processes of their own, so the GIL the chat threads share
adds nothing to the latencies. Chats go as fast as they are answered (--pause-ms slows them):
the table gives webpilot's CPU use per phase, to tell a saturated machine from a blocked
runtime. Afterwards each completed turn must be stored (then the conversations are deleted).
Stdlib only.

  python3 bench/store_load.py --seconds 30 [--bin target/release/webpilot] [--out FILE]
  python3 bench/store_load.py --database-url postgres://user:pass@127.0.0.1/webpilot
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lifecycle import run_and_save, stop_webpilot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHATS = 20
TARGET_P99_MS = 20.0
BUSY = "busy, sent again"
MODEL = "bench-stand-in"
# About 330 characters, streamed in four pieces: a realistic short answer.
ANSWER = ("Here is a short summary of our conversation so far. You asked me to keep track of the "
          "turns, and I have: this answer is stored with your question as one complete turn. "
          "Nothing needed a browser or a web search, so I answered from the conversation alone. "
          "Ask again and I will add another turn to the same history.")


def log(*args):
    print("[store_load]", *args, file=sys.stderr, flush=True)


def ignore_sigint():
    # Ctrl-C reaches the whole process group; the parent alone cleans up and ends its children.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class ModelHandler(http.server.BaseHTTPRequestHandler):
    """POST /v1/chat/completions with "stream": true, as src/web/llm.rs reads it."""
    protocol_version = "HTTP/1.1"      # keep-alive and chunked bodies, as reqwest expects
    disable_nagle_algorithm = True     # small SSE writes must not wait for delayed ACKs

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self.send_error(404, f"no route {self.path}")
        # Not parsed whole: the body holds the conversation's whole history, and parsing it
        # would take this machine's CPU from the service measured. serde_json writes it compact.
        if b'"stream":true' not in body:
            return self.send_error(400, "this stand-in only streams")
        model = re.search(rb'"model":"([^"]*)"', body)
        base = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model[1].decode() if model else MODEL, "usage": None}
        step = len(ANSWER) // 4 + 1
        deltas = [{"role": "assistant", "content": ""}]
        deltas += [{"content": ANSWER[i:i + step]} for i in range(0, len(ANSWER), step)]
        chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        # Asked for stream_options.include_usage, OpenAI ends with no choices and the usage.
        usage = {"prompt_tokens": len(body) // 4, "completion_tokens": len(ANSWER) // 4}
        usage["total_tokens"] = sum(usage.values())
        chunks.append({**base, "choices": [], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for data in [json.dumps(c) for c in chunks] + ["[DONE]"]:
            event = f"data: {data}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


def serve_model(ports):
    """The stand-in model's process: reports its port, then serves until terminated."""
    ignore_sigint()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ModelHandler)
    ports.put(server.server_address[1])
    server.serve_forever()


def probe(port: int, seconds: float, interval: float) -> dict:
    """GET /healthz every `interval` s for `seconds` over one keep-alive connection (in the
    prober's process); a late probe is not made up for, so a stall shows as one long probe."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies, errors = [], 0
    start = tick = time.monotonic()
    while tick - start < seconds:
        time.sleep(max(0.0, tick - time.monotonic()))
        asked = time.perf_counter()
        try:
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            conn.close()
            ok = False
        if ok:
            latencies.append((time.perf_counter() - asked) * 1000)
        else:
            errors += 1
        tick = max(tick + interval, time.monotonic())
    conn.close()
    return {"latencies_ms": latencies, "errors": errors, "start": start, "end": time.monotonic()}


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def outcome_of(status: int, text: str) -> str:
    """"ok" for an SSE answer ending in `done`, else what went wrong (an error code)."""
    if status != 200:
        code = re.search(r'"code":\s*"(\w+)"', text)
        return f"HTTP {status} {code.group(1) if code else ''}".strip()
    events = dict(re.findall(r"^event: ?(\S+)\r?\ndata: ?(.*)$", text, re.M))
    if "error" in events:   # the contract's error: {"code", "message", "hint", "status"}
        return f"error event {json.loads(events['error']).get('code')}"
    return "ok" if "done" in events else "no done event"


def chat_worker(port: int, conversation: str, stop: threading.Event, turns: list, pause: float):
    """Sends message after message to one conversation, each answer read to its end, `pause` s
    apart; appends (finished at, seconds, outcome) to `turns`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    number = 0
    while not stop.is_set():
        number += 1
        body = json.dumps({"content": f"Turn {number}: add this to our history."}).encode()
        asked = time.monotonic()
        try:
            conn.request("POST", f"/api/conversations/{conversation}/messages", body,
                         {"Content-Type": "application/json", "Accept": "text/event-stream"})
            response = conn.getresponse()
            outcome = outcome_of(response.status, response.read().decode())
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            outcome = type(error).__name__
        if outcome == "HTTP 429 LIMIT":
            # The stream can end a moment before the service marks the conversation free
            # again: not an error of the store, so wait and send again.
            turns.append((time.monotonic(), 0.0, BUSY))
            time.sleep(0.005)
            continue
        turns.append((time.monotonic(), time.monotonic() - asked, outcome))
        stop.wait(pause)
    conn.close()


def start_webpilot(binary: str, data_dir: str, model_url: str, database_url: str | None):
    """`webpilot serve` on a free loopback port, its model the stand-in; returns (process,
    port, stderr lines counted by level)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBPILOT_")}
    env.update(WEBPILOT_LOG="info", WEBPILOT_LLM_BASE_URL=model_url, WEBPILOT_LLM_MODEL=MODEL,
               WEBPILOT_LLM_API_KEY="bench", WEBPILOT_SHUTDOWN_GRACE_SECS="2",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    command = [binary, "--port", "0", "--data-dir", data_dir, "serve"]
    if database_url:
        command[1:1] = ["--database-url", database_url]
    # A session of its own: Ctrl-C does not reach it (or a Chromium it may start) before we
    # stop it, and the whole group can be killed at the end. cwd: no stray webpilot.toml.
    proc = subprocess.Popen(command, env=env, cwd=data_dir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in proc.stderr:
        if match := re.search(r"listening on http://127\.0\.0\.1:(\d+)", line):
            port = int(match.group(1))
            break
    else:
        raise SystemExit(f"webpilot did not start (exit status {proc.wait()})")
    logged = {"ERROR": 0, "WARN": 0, "last_error": None, "last_warning": None}

    def drain():   # and count what the service logs as ERROR ("a turn was not stored") or WARN
        for text in proc.stderr:
            level = next((lv for lv in ("ERROR", "WARN") if f" {lv} " in text), None)
            if level:
                logged[level] += 1
                logged["last_error" if level == "ERROR" else "last_warning"] = text.strip()[:300]
    threading.Thread(target=drain, daemon=True).start()
    for _ in range(300):
        with contextlib.suppress(OSError):
            if call(port, "GET", "/healthz")[0] == 200:
                return proc, port, logged
        time.sleep(0.1)
    raise SystemExit("webpilot did not answer /healthz within 30 s")



def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) of a process so far, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def phase_row(name: str, probed: dict, cpu_s: float, turns: list | None = None) -> dict:
    """One phase's probes, and the chat turns that ended while they ran."""
    latencies, seconds = probed["latencies_ms"], probed["end"] - probed["start"]
    turns = [t for t in turns or [] if probed["start"] <= t[0] <= probed["end"]]
    errors = Counter(o for _, _, o in turns if o not in ("ok", BUSY))
    row = {"phase": name, "seconds": round(seconds, 2), "probes": len(latencies),
           "probe_errors": probed["errors"], "chat_errors": dict(errors),
           "errors": probed["errors"] + sum(errors.values()),
           "webpilot_cpu_percent": round(100 * cpu_s / seconds), "turns_per_s": None}
    for label, share in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
        row[f"{label}_ms"] = round(percentile(latencies, share), 2) if latencies else None
    if name != "idle":
        ok = [s for _, s, o in turns if o == "ok"]
        row.update(turns=len(ok), turns_per_s=round(len(ok) / seconds, 1),
                   sent_again_busy=sum(1 for t in turns if t[2] == BUSY),
                   turn_p50_ms=round(1000 * percentile(ok, 0.5), 1) if ok else None,
                   turn_p95_ms=round(1000 * percentile(ok, 0.95), 1) if ok else None)
    return row


def run(args) -> dict:
    spawn = multiprocessing.get_context("spawn")
    ports = spawn.Queue()
    model = spawn.Process(target=serve_model, args=(ports,), daemon=True)
    prober = proc = None
    data_dir = tempfile.mkdtemp(prefix="webpilot-store-load-")
    stop = threading.Event()
    try:
        model.start()
        model_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
        prober = spawn.Pool(1, initializer=ignore_sigint)
        proc, port, logged = start_webpilot(args.bin, data_dir, model_url, args.database_url)
        log(f"webpilot on 127.0.0.1:{port}, model stand-in at {model_url}, data in {data_dir}")

        def measure(seconds: float) -> tuple[dict, float]:
            cpu = cpu_seconds(proc.pid)
            probed = prober.apply(probe, (port, seconds, args.interval_ms / 1000))
            return probed, cpu_seconds(proc.pid) - cpu

        conversations = []
        for number in range(args.chats):
            # No tools: the stand-in never calls one, and their definitions would only make
            # every model request bigger than the turn being stored.
            status, created = call(port, "POST", "/api/conversations",
                                   {"title": f"store load {number}", "tools": []})
            if status != 200:
                raise SystemExit(f"POST /api/conversations answered {status}: {created}")
            conversations.append(created["id"])
        idle_s = args.seconds / 3
        log(f"idle: probing /healthz for {idle_s:.0f} s")
        idle = phase_row("idle", *measure(idle_s))
        turns: list[tuple[float, float, str]] = []
        workers = [threading.Thread(target=chat_worker, daemon=True,
                                    args=(port, c, stop, turns, args.pause_ms / 1000))
                   for c in conversations]
        for worker in workers:
            worker.start()
        time.sleep(1)   # every chat past its first turn before the window opens
        log(f"load: {args.chats} chats, probing /healthz for {args.seconds - idle_s:.0f} s")
        loaded = phase_row(f"{args.chats} chats", *measure(args.seconds - idle_s), turns)
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        # Every completed turn must have been stored: its question and its answer. Then the
        # conversations go, so that none is left behind in a PostgreSQL that outlives the run.
        stored = 0
        for conversation in conversations:
            stored += len(call(port, "GET", f"/api/conversations/{conversation}")[1].get("messages", []))
            call(port, "DELETE", f"/api/conversations/{conversation}")
        return {"store": "postgresql" if args.database_url else "sqlite", "chats": args.chats,
                "interval_ms": args.interval_ms, "pause_ms": args.pause_ms, "cpus": os.cpu_count(),
                "target_p99_ms": TARGET_P99_MS, "phases": [idle, loaded],
                "target_met": loaded["p99_ms"] is not None and loaded["p99_ms"] <= TARGET_P99_MS,
                "stored_messages": stored, "expected_messages": 2 * sum(1 for t in turns if t[2] == "ok"),
                "service_log": logged}
    finally:
        stop.set()
        if proc is not None:
            stop_webpilot(proc)
        if prober is not None:
            prober.terminate()
        if model.is_alive():
            model.terminate()
            model.join(timeout=5)
        shutil.rmtree(data_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "webpilot"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/store_load.json")
    parser.add_argument("--seconds", type=float, default=30, help="both phases together")
    parser.add_argument("--chats", type=int, default=CHATS)
    parser.add_argument("--interval-ms", type=float, default=10, help="between /healthz probes")
    parser.add_argument("--pause-ms", type=float, default=0,
                        help="between a chat's turns (default none: as fast as they are answered)")
    parser.add_argument("--database-url", help="PostgreSQL instead of SQLite in the data dir")
    args = parser.parse_args()
    result = run_and_save(lambda: run(args), args.out,
                          "[store_load] interrupted; webpilot, the stand-in and the prober are stopped")
    print(f"\n/healthz every {args.interval_ms:g} ms; {result['store']} store; {args.chats} chats at once, "
          f"{args.pause_ms:g} ms between a chat's turns; {result['cpus']} CPUs\n")
    print("| phase | healthz probes | p50 ms | p95 ms | p99 ms | max ms | chat turns/s | errors | webpilot CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in result["phases"]:
        print(f"| {row['phase']} | {row['probes']} | {row['p50_ms']} | {row['p95_ms']} | {row['p99_ms']} "
              f"| {row['max_ms']} | {'–' if row['turns_per_s'] is None else row['turns_per_s']} | {row['errors']} | {row['webpilot_cpu_percent']} % |")
    loaded, logged = result["phases"][1], result["service_log"]
    print(f"\nTarget /healthz p99 under load ≤ {TARGET_P99_MS:g} ms: "
          f"{'met' if result['target_met'] else 'NOT met'} ({loaded['p99_ms']} ms). Chat turn p50/p95 "
          f"{loaded['turn_p50_ms']}/{loaded['turn_p95_ms']} ms; chat errors {loaded['chat_errors'] or 'none'}; "
          f"stored {result['stored_messages']} of {result['expected_messages']} messages expected; "
          f"service log: {logged['ERROR']} errors, {logged['WARN']} warnings. JSON: {args.out}")


if __name__ == "__main__":
    main()
