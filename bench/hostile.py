#!/usr/bin/env python3
"""The hostile set against a real `webpilot serve`: time, peak memory and idle memory after.

  python3 bench/hostile.py --bin target/release/webpilot [--out FILE]

Serves on 127.0.0.1 what a stranger may send (20,000 nested tables, 100,000 nested divs,
10,000 and 20,000 nested divs, XPath and CSS schemas over 2,000 nested divs, an ODS whose
repeated rows and columns would make a billion cells, an EPUB listing one 1 MiB chapter 3,000
times, a 50 MB robots.txt in a crawl, a 1,000,000-line cookies.txt import), calls the real
tools one at a time, and reads the service's VmHWM and VmRSS from /proc after each call and
after 30 s idle. Stdlib only. WEBPILOT_BENCH_ALLOCATOR=jemalloc|mimalloc runs the service on
another allocator (bench/allocator.py).
"""
from __future__ import annotations

import argparse
import http.server
import io
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile

from allocator import allocator_env


def nested(open_tag: str, close_tag: str, levels: int, inner: str = "x") -> bytes:
    return (
        "<!doctype html><title>Deep</title><h1>Top</h1><p>A first paragraph.</p>"
        + open_tag * levels + inner + close_tag * levels + "<p>Last.</p>"
    ).encode()


def ods_bomb() -> bytes:
    row = ('<table:table-row table:number-rows-repeated="1000000">'
           '<table:table-cell table:number-columns-repeated="1000" office:value-type="string">'
           '<text:p>' + "v" * 200 + '</text:p></table:table-cell></table:table-row>')
    content = ('<?xml version="1.0"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
               '<office:spreadsheet><table:table table:name="Bomb">' + row +
               '</table:table></office:spreadsheet></office:body></office:document-content>')
    return package("application/vnd.oasis.opendocument.spreadsheet", {"content.xml": content})


def epub_repeating() -> bytes:
    # Varied words: a chapter of one word repeated inflates past the package's ratio cap (a
    # zip bomb to the reader) and is refused before the spine is read.
    words = " ".join(f"w{(i * 7919) % 100003}" for i in range(150_000))
    chapter = ("<html xmlns='http://www.w3.org/1999/xhtml'><body><p>" + words
               + "</p></body></html>")
    spine = "".join('<itemref idref="c"/>' for _ in range(3000))
    opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Loop</dc:title>'
           '</metadata><manifest><item id="c" href="c.xhtml" '
           'media-type="application/xhtml+xml"/></manifest><spine>' + spine +
           '</spine></package>')
    container = ('<?xml version="1.0"?><container version="1.0" '
                 'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                 '<rootfile full-path="book.opf" media-type="application/oebps-package+xml"/>'
                 '</rootfiles></container>')
    return package("application/epub+zip", {"META-INF/container.xml": container,
                                            "book.opf": opf, "c.xhtml": chapter})


def package(mimetype: str, parts: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), mimetype, compress_type=zipfile.ZIP_STORED)
        for name, text in parts.items():
            z.writestr(name, text)
    return out.getvalue()


PAGES: dict[str, tuple[bytes, str]] = {}


def build_pages() -> None:
    html = "text/html; charset=utf-8"
    PAGES["/small"] = (nested("<div>", "</div>", 3), html)
    PAGES["/tables"] = (nested("<table><tr><td>", "</td></tr></table>", 20_000), html)
    for levels in (10_000, 20_000, 100_000):
        PAGES[f"/divs-{levels}"] = (nested("<div>", "</div>", levels), html)
    PAGES["/divs-2000"] = (nested("<div class=d>", "</div>", 2_000), html)
    PAGES["/bomb.ods"] = (ods_bomb(), "application/vnd.oasis.opendocument.spreadsheet")
    PAGES["/loop.epub"] = (epub_repeating(), "application/epub+zip")
    robots = b"User-agent: *\nDisallow: /private/\n" + b"# filler\n" * (50 * 1024 * 1024 // 9)
    PAGES["/robots.txt"] = (robots, "text/plain")
    PAGES["/"] = (b"<!doctype html><title>Home</title><a href=/small>small</a>", html)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        page = PAGES.get(self.path.split("?")[0])
        if page is None:
            self.send_error(404)
            return
        body, mime = page
        self.send_response(200)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def memory(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {k: int(fields[k].split()[0]) // 1024 for k in ("VmHWM", "VmRSS")}


def call(api: str, tool: str, args: dict) -> tuple[float, dict]:
    request = urllib.request.Request(f"{api}/api/tools/{tool}", data=json.dumps(args).encode(),
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.load(response)
    except urllib.error.HTTPError as error:
        body = json.load(error)
    return (time.perf_counter() - started) * 1000, body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="target/release/webpilot")
    parser.add_argument("--out")
    args = parser.parse_args()
    build_pages()
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}"
    data = tempfile.mkdtemp()
    service = subprocess.Popen(
        [args.bin, "--port", "0", "--data-dir", data, "serve"],
        env={**os.environ, "WEBPILOT_FETCH_ALLOW": "127.0.0.1", "WEBPILOT_LOG": "info",
             **allocator_env()},
        stderr=subprocess.PIPE, text=True)
    api = None
    for line in service.stderr:
        if "http://" in line:
            api = line[line.index("http://"):].strip()
            break
    threading.Thread(target=lambda: [None for _ in service.stderr], daemon=True).start()
    rows = []

    def measure(name: str, tool: str, call_args: dict) -> None:
        ms, body = call(api, tool, call_args)
        error = body.get("error", {}).get("code") if isinstance(body, dict) else None
        mem = memory(service.pid)
        rows.append({"case": name, "ms": round(ms, 1), "answer": error or "content",
                     "peak_mib": mem["VmHWM"], "rss_mib": mem["VmRSS"]})
        print(json.dumps(rows[-1]), flush=True)

    measure("ordinary page (warm-up)", "open_web_page", {"url": f"{site}/small", "mode": "http"})
    before = memory(service.pid)["VmRSS"]
    for path in ("/tables", "/divs-10000", "/divs-20000", "/divs-100000"):
        for extract in ("main", "structured"):
            measure(f"{path} {extract}", "open_web_page",
                    {"url": f"{site}{path}", "mode": "http", "extract": extract})
    for field in ("count(.//div//div)", "div div div"):
        measure(f"schema {field}", "open_web_page",
                {"url": f"{site}/divs-2000", "mode": "http", "extract": "json",
                 "schema": {"fields": {"found": field}}})
    measure("ODS of a billion cells", "open_web_page", {"url": f"{site}/bomb.ods"})
    measure("EPUB repeating a chapter", "open_web_page", {"url": f"{site}/loop.epub"})
    lines = "".join(f".example.com\tTRUE\t/\tFALSE\t0\tc{i}\tv{i}\n" for i in range(1_000_000))
    measure("cookies.txt of 1,000,000 lines", "browser_cookies",
            {"action": "import", "name": "bomb", "content": lines})
    ms, task = call(api, "crawl_batch", {"urls": [f"{site}/"], "follow": {"depth": 1}})
    status = {}
    for _ in range(60):
        _, status = call(api, "crawl_status", {"task_id": task["task_id"], "wait": 2})
        if status.get("status") in ("completed", "failed", "cancelled"):
            break
    mem = memory(service.pid)
    rows.append({"case": "crawl with a 50 MB robots.txt", "answer": status.get("status"),
                 "peak_mib": mem["VmHWM"], "rss_mib": mem["VmRSS"]})
    print(json.dumps(rows[-1]), flush=True)
    time.sleep(30)
    idle = memory(service.pid)
    summary = {"rss_before_mib": before, "peak_mib": idle["VmHWM"],
               "idle_rss_after_30s_mib": idle["VmRSS"],
               "idle_over_before": round(idle["VmRSS"] / before, 2),
               "alive": service.poll() is None}
    print(json.dumps(summary), flush=True)
    service.terminate()
    service.wait(timeout=30)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"rows": rows, "summary": summary}, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
