#!/usr/bin/env python3
"""Browser renders in a crawl: 16 local JavaScript-shell pages (an empty root that a script fills
after a 300 ms timer and a fetch), read by one crawl_batch task in mode auto, so every page
escalates to a browser render; at parallel 1 and at parallel 4, alternated for --rounds rounds.
Reports each round's wall times and their ratio.

  python3 bench/crawl_renders.py --bin target/release/webpilot --rounds 3
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import socketserver
import statistics
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crawl import crawl_until_done  # noqa: E402
from extraction import call, log, start_webpilot  # noqa: E402

PAGES = 16
SHELL = """<!doctype html><html><head><title>Shell {n}</title></head><body><div id="root"></div>
<script>setTimeout(async () => {{
  const data = await (await fetch("data-{n}.json")).json();
  document.getElementById("root").innerHTML = "<article><h1>" + data.title + "</h1><p>" + data.text + "</p></article>";
}}, 300);</script></body></html>"""


def serve_shells(folder: str) -> str:
    for n in range(1000):
        with open(os.path.join(folder, f"shell-{n}.html"), "w") as page:
            page.write(SHELL.format(n=n))
        with open(os.path.join(folder, f"data-{n}.json"), "w") as data:
            json.dump({"title": f"Rendered {n}", "text": f"Page {n}: text that exists only after the script ran. " * 4}, data)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=folder)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def crawl(api: str, origin: str, first: int, parallel: int) -> float:
    urls = [f"{origin}/shell-{n}.html" for n in range(first, first + PAGES)]
    _, status, seconds = crawl_until_done(api, {"urls": urls, "parallel": parallel}, poll=0.02)
    vias = {r["result"]["via"] for r in status["results"]}
    if status["errors"] or vias != {"browser"}:
        raise SystemExit(f"unexpected crawl outcome: errors {status['errors']}, via {vias}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "release", "webpilot"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as data_dir:
        origin = serve_shells(folder)
        proc, api = start_webpilot(args.bin, data_dir)
        try:
            call(api, "open_web_page", {"url": f"{origin}/shell-999.html"})  # Chromium starts here
            rounds, first = [], 0
            for _ in range(args.rounds):
                one = crawl(api, origin, first, 1)
                four = crawl(api, origin, first + PAGES, 4)
                first += 2 * PAGES
                rounds.append((one, four))
                log(f"parallel 1 {one:.2f} s, parallel 4 {four:.2f} s ({four / one:.2f}x)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    ratios = [four / one for one, four in rounds]
    print(f"| {PAGES} JavaScript-shell pages, parallel 1 vs 4 | "
          + ", ".join(f"{one:.2f} s / {four:.2f} s" for one, four in rounds)
          + f" | median {statistics.median(ratios):.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f}x) |")


if __name__ == "__main__":
    main()
