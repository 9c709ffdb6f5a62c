#!/usr/bin/env python3
"""Crawl throughput: 200 local pages (the shared corpus pages, served on two local ports) read
by one crawl_batch task with parallel=8 and mode=http; reports pages/s and webpilot's peak RSS.

  python3 bench/crawl.py --bin target/release/webpilot
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extraction import CORPORA, SHARED, call, log, serve_corpus, start_webpilot  # noqa: E402

PAGES = 200
PARALLEL = 8


def page_urls(origins: list[str], count: int = PAGES) -> list[str]:
    pages = [(name, page) for name, folder in CORPORA.items()
             for page in sorted(os.listdir(os.path.join(SHARED, "corpus", folder)))]
    return [f"{origins[i % len(origins)]}/{pages[i % len(pages)][0]}/{pages[i % len(pages)][1]}/source.html"
            for i in range(count)]


def crawl_until_done(api: str, args: dict, poll: float = 0.05, wait: int = 0) -> tuple[dict, dict, float]:
    """Starts a crawl_batch task and polls crawl_status until it finished: (task, status, seconds).
    With `wait` (seconds, under call's 60 s timeout), each crawl_status awaits the task's end
    instead of asking again every `poll` seconds: no status built 20 times a second on the
    machine being measured during a long crawl, and the end seen when it happens."""
    started = time.perf_counter()
    task = call(api, "crawl_batch", args)
    if "task_id" not in task:
        raise SystemExit(f"crawl_batch refused: {task}")
    ask = {"task_id": task["task_id"], **({"wait": wait} if wait else {})}
    while True:
        status = call(api, "crawl_status", ask)
        if status["status"] in ("completed", "failed"):
            return task, status, time.perf_counter() - started
        if not wait:
            time.sleep(poll)


def peak_rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "release", "webpilot"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/crawl.json")
    args = parser.parse_args()
    origins = [serve_corpus(), serve_corpus()]
    with tempfile.TemporaryDirectory() as data_dir:
        proc, api = start_webpilot(args.bin, data_dir)
        try:
            task, _, seconds = crawl_until_done(api, {"urls": page_urls(origins), "parallel": PARALLEL, "mode": "http"})
            # crawl_status pages its results; the REST task endpoint returns all of them.
            with urllib.request.urlopen(f"{api}/api/crawler/tasks/{task['task_id']}", timeout=60) as response:
                everything = json.load(response)
            result = {"pages": PAGES, "parallel": PARALLEL, "seconds": round(seconds, 3),
                      "pages_per_second": round(PAGES / seconds, 1), "errors": len(everything["errors"]),
                      "peak_rss_mib": round(peak_rss_mib(proc.pid), 1)}
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    json.dump(result, open(args.out, "w"), indent=2)
    log(json.dumps(result))
    print(f"| crawl {PAGES} local pages, parallel {PARALLEL} | {result['pages_per_second']} pages/s "
          f"({result['seconds']} s, {result['errors']} errors) | peak RSS {result['peak_rss_mib']} MiB |")


if __name__ == "__main__":
    main()
