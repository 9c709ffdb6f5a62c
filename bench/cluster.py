#!/usr/bin/env python3
"""Crawl throughput of 1, 2 and 3 webpilot instances on one PostgreSQL: one crawl_batch task of
300 local pages (the shared corpus, two local origins, mode=http, parallel=16) submitted to the
first instance and worked on by all, `per_host` 16 by default (--per-host); pages/s per instance count, and the database round trips
per page (the instances' `webpilot_crawl_database_queries_total`, claims that found nothing
included). PostgreSQL is Debian's, started here in a temporary directory.

  python3 bench/cluster.py --bin target/release/webpilot [--rounds 3]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crawl import page_urls  # noqa: E402
from extraction import call, log, serve_corpus, start_webpilot  # noqa: E402

PAGES = 300
# A task's parallel holds across instances: the most a task may have (max_parallel's default).
PARALLEL = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_postgres(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def start_postgres(directory: str) -> tuple[subprocess.Popen, int]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if not bins:
        raise SystemExit("PostgreSQL is not installed (scripts/setup --test installs it)")
    bin_dir = bins[-1]
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    data = os.path.join(directory, "data")
    subprocess.run(as_postgres([f"{bin_dir}/initdb", "-D", data, "-U", "webpilot", "-A", "trust", "--no-sync"]),
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(as_postgres([f"{bin_dir}/postgres", "-D", data, "-p", str(port), "-k", directory,
                                           "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "webpilot", "-d", "postgres",
                          "-qc", "SELECT 1"], capture_output=True).returncode != 0:
        if time.time() > deadline:
            raise SystemExit("PostgreSQL did not start")
        time.sleep(0.1)
    return server, port


def crawl_to_done(api: str, args: dict) -> tuple[dict, float]:
    """Starts a task and reads its SSE progress until `done` (no status polling, whose queries
    would count against the crawl): (the done event, seconds)."""
    started = time.perf_counter()
    task = call(api, "crawl_batch", args)
    with urllib.request.urlopen(f"{api}/api/crawler/tasks/{task['task_id']}/events", timeout=600) as stream:
        event = None
        for line in stream:
            line = line.decode().strip()
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "done":
                return json.loads(line.split(":", 1)[1]), time.perf_counter() - started
    raise SystemExit("the event stream ended without done")


def queries(api: str) -> float:
    with urllib.request.urlopen(f"{api}/metrics", timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("webpilot_crawl_database_queries_total "):
                return float(line.split()[1])
    return 0.0


def run(binary: str, port: int, instances: int, database: str, origins: list[str], per_host: int) -> dict:
    subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "webpilot", "-d", "postgres",
                    "-qc", f"CREATE DATABASE {database}"], check=True)
    url = f"postgres://webpilot@127.0.0.1:{port}/{database}"
    started = []
    with tempfile.TemporaryDirectory() as root:
        try:
            for n in range(instances):
                data_dir = os.path.join(root, f"instance-{n}")
                os.makedirs(data_dir)
                config = os.path.join(data_dir, "webpilot.toml")
                open(config, "w").write(f"[crawl]\nmax_urls = 1000\nper_host = {per_host}\n")
                started.append(start_webpilot(binary, data_dir, {"WEBPILOT_DATABASE_URL": url,
                                                                 "WEBPILOT_CONFIG": config}))
            apis = [api for _, api in started]
            before = sum(queries(api) for api in apis)
            done, seconds = crawl_to_done(apis[0], {"urls": page_urls(origins, PAGES),
                                                     "parallel": PARALLEL, "mode": "http"})
            after = sum(queries(api) for api in apis)
        finally:
            for proc, _ in started:
                proc.terminate()
                proc.wait(timeout=30)
    return {"instances": instances, "seconds": round(seconds, 3), "pages_per_second": round(PAGES / seconds, 1),
            "round_trips_per_page": round((after - before) / PAGES, 2), "status": done["status"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "release", "webpilot"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-host", type=int, default=16,
                        help="[crawl] per_host; 16 leaves the task's 16 pages at once room on the two origins, "
                             "4 makes the instances compete for host slots")
    parser.add_argument("--out", default="/tmp/webpilot-bench/cluster.json")
    args = parser.parse_args()
    origins = [serve_corpus(), serve_corpus()]
    results = {1: [], 2: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="webpilot-bench-pg-") as directory:
        server, port = start_postgres(directory)
        try:
            # Interleaved, so drift of the machine touches every instance count alike.
            for round_ in range(args.rounds):
                for instances in results:
                    result = run(args.bin, port, instances, f"bench_{round_}_{instances}", origins, args.per_host)
                    log(json.dumps(result))
                    results[instances].append(result)
        finally:
            server.terminate()
            server.wait(timeout=30)
    summary = []
    for instances, runs in results.items():
        rates = [r["pages_per_second"] for r in runs]
        trips = [r["round_trips_per_page"] for r in runs]
        summary.append({"instances": instances, "pages_per_second_median": statistics.median(rates),
                        "pages_per_second_min": min(rates), "pages_per_second_max": max(rates),
                        "round_trips_per_page_median": statistics.median(trips),
                        "round_trips_per_page_max": max(trips), "runs": runs})
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    json.dump(summary, open(args.out, "w"), indent=2)
    print(f"| instances (per_host {args.per_host}) | pages/s (median, min–max of {args.rounds}) | DB round trips per page (median, max) |")
    print("|---|---|---|")
    for row in summary:
        print(f"| {row['instances']} | {row['pages_per_second_median']} ({row['pages_per_second_min']}–"
              f"{row['pages_per_second_max']}) | {row['round_trips_per_page_median']} "
              f"({row['round_trips_per_page_max']}) |")


if __name__ == "__main__":
    main()
