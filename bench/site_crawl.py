#!/usr/bin/env python3
"""Site crawl against Scrapy: webpilot following links through a generated site, next to Scrapy
with trafilatura doing the same work (every page's main content as Markdown), in one run.

  python3 bench/site_crawl.py --bin target/release/webpilot [--rounds 3] [--pages 2000] [--rss-pages 10000]

The site: --pages pages, each a real page of the shared corpus (../shared/corpus, cycled) with a
<nav> before </body> linking to its children 8i+1..8i+8, to two deterministic cross links and
back to /, so every page is reachable from / (page 0) and the link graph has more links than
pages, as a real site's has; robots.txt allows everything. Debian's nginx serves it
(2 workers, in a temporary prefix).

Each round, one after another, so drift of the machine touches all alike:
  * webpilot: a fresh `webpilot serve` ([crawl] per_host 16, global_parallel 32, max_parallel 16,
    max_urls 20000), one crawl_batch task from / with follow (depth 20, max_pages --pages),
    mode http, extract main, format markdown, parallel 16, crawl_status (wait) until it ends:
    results ÷ seconds from submit to completion; peak RSS is the process's VmHWM;
  * Scrapy + trafilatura: a spider from / following every link of the host (no depth limit,
    robots.txt obeyed, 16 requests at once, no delay, no autothrottle, no cache) calling
    trafilatura.extract(output_format="markdown") on each page: pages ÷ seconds from the
    spider's start until it is idle; peak RSS is its own VmHWM, read by the spider at the end;
  * Scrapy fetching only: the same spider without trafilatura (what the crawling costs alone).

Then (--rss-pages, 0 to skip) one webpilot crawl of a site of that many pages, for its peak RSS
against 200 MiB. Scrapy and trafilatura are installed from PyPI into --venv when missing.
Prints a Markdown table; everything measured goes to --out as JSON. Stdlib only here.
"""
from __future__ import annotations

import argparse
import glob
import grp
import json
import os
import pwd
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import free_port  # noqa: E402
from crawl import crawl_until_done, peak_rss_mib  # noqa: E402
from extraction import CORPORA, ROOT, SHARED, log, start_webpilot  # noqa: E402

PARALLEL = 16
# crawl_status awaits the end this long per call rather than being polled 20 times a second:
# Scrapy's runs have no poller beside them on these 2 cores either.
STATUS_WAIT = 50
RSS_LIMIT_MIB = 200
CRAWL_CONFIG = """[crawl]
per_host = 16
global_parallel = 32
max_parallel = 16
max_urls = 20000
"""
# The corpus pages keep their own links (thousands of them), so both crawlers extract and judge
# as many links as on the real pages; but their relative ones would resolve on this host to
# URLs nginx does not have, which both would fetch as 404s (and which would count against
# webpilot's max_pages). So each page gets this <base href>, the document URL Mozilla's
# harness parses its pages with (corpus README): those links point off the site and are left
# out of scope by both crawlers, never fetched; the nav links are absolute, on the site.
OFF_SITE_BASE = b'<base href="http://fakehost/test/page.html">'
# Scrapy finds a page's <base href> in its first 4096 characters only.
SCRAPY_BASE_WINDOW = 4096
NGINX = "/usr/sbin/nginx"

SPIDER_PY = r'''
"""One Scrapy crawl of the generated site: python spider.py ORIGIN extract|fetch."""
import json, re, resource, sys, time

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor

origin, variant = sys.argv[1], sys.argv[2]
extract = variant == "extract"
if extract:
    import trafilatura


class Site(scrapy.Spider):
    name = "site"
    # Links on the site's host:port only (allowed_domains would not tell ports apart).
    links = LinkExtractor(allow=["^" + re.escape(origin) + "/"])
    pages = extracted = 0
    started = idle = None

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signals.spider_opened)
        crawler.signals.connect(spider.went_idle, signals.spider_idle)
        return spider

    def opened(self, spider):
        self.started = time.perf_counter()

    def went_idle(self, spider):
        # Idle: nothing scheduled, downloading or being parsed, so the crawl is over; the
        # shutdown after it is not counted (webpilot's is not either).
        if self.idle is None:
            self.idle = time.perf_counter()

    async def start(self):
        # Not start_urls: their requests skip the duplicate filter, so the links back to / would
        # read it a second time.
        yield scrapy.Request(origin + "/", callback=self.parse)

    def parse(self, response):
        self.pages += 1
        if extract and trafilatura.extract(response.text, output_format="markdown", url=response.url):
            self.extracted += 1
        for link in self.links.extract_links(response):
            yield scrapy.Request(link.url, callback=self.parse)


def vm_hwm_kib():
    # This process's own high-water mark. ru_maxrss is not: Linux carries the forking parent's
    # peak into it across exec, so it would count the bench driver's memory as Scrapy's.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


process = CrawlerProcess({
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "HTTPCACHE_ENABLED": False,
    # No depth limit: Scrapy goes depth first (LIFO), reaches pages by long chains of cross
    # links first and drops what lies past the limit; with 20, a few pages of 2,000 were never
    # read, different ones each run. Depth 20 never limits webpilot here: it reads by hops.
    "DEPTH_LIMIT": 0,
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
})
crawler = process.create_crawler(Site)
process.crawl(crawler)
process.start()
spider, stats = crawler.spider, crawler.stats.get_stats()
statuses = {key.rsplit("/", 1)[1]: value for key, value in stats.items()
            if key.startswith("downloader/response_status_count/")}
print(json.dumps({
    "pages": spider.pages, "extracted": spider.extracted,
    "seconds": round((spider.idle or time.perf_counter()) - spider.started, 3),
    "peak_rss_mib": round(vm_hwm_kib() / 1024, 1),
    "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "requests": stats.get("downloader/request_count", 0), "statuses": statuses,
    "exceptions": stats.get("downloader/exception_count", 0),
    "errors_logged": stats.get("log_count/ERROR", 0),
    "robots_forbidden": stats.get("robotstxt/forbidden", 0),
    "offsite_or_filtered": stats.get("offsite/filtered", 0),
    "versions": {"scrapy": scrapy.__version__,
                 "trafilatura": trafilatura.__version__ if extract else None},
}))
'''


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p/{i}.html"


def links_of(i: int, pages: int) -> list[int]:
    """Page i's nav: its children in an 8-ary tree (so all are reachable from /), two cross
    links elsewhere in the site, and back to the start page."""
    children = [c for c in range(8 * i + 1, 8 * i + 9) if c < pages]
    return children + [(i * 7 + 3) % pages, (i * 13 + 5) % pages, 0]


def corpus_pages() -> list[bytes]:
    """The corpus pages' source.html (UTF-8), their own <base> tags replaced by OFF_SITE_BASE."""
    pages = []
    for folder in CORPORA.values():
        for path in sorted(glob.glob(os.path.join(SHARED, "corpus", folder, "*", "source.html"))):
            html = re.sub(rb"<base\b[^>]*>", b"", open(path, "rb").read(), flags=re.I)
            head = re.search(rb"<head\b[^>]*>", html, re.I) or re.search(rb"<html\b[^>]*>", html, re.I)
            at = head.end() if head else 0
            html = html[:at] + OFF_SITE_BASE + html[at:]
            if len(html[:at].decode("utf-8", "replace")) + len(OFF_SITE_BASE) > SCRAPY_BASE_WINDOW:
                log(f"warning: the <base> of {path} is past Scrapy's first {SCRAPY_BASE_WINDOW} characters")
            pages.append(html)
    if not pages:
        raise SystemExit(f"no corpus pages under {SHARED}/corpus")
    return pages


def generate_site(directory: str, origin: str, pages: int) -> None:
    corpus = corpus_pages()
    os.makedirs(os.path.join(directory, "p"))
    with open(os.path.join(directory, "robots.txt"), "w") as f:
        f.write("User-agent: *\nAllow: /\n")
    for i in range(pages):
        html = corpus[i % len(corpus)]
        nav = "".join(f'<li><a href="{origin}{page_path(j)}">Page {j}</a></li>' for j in links_of(i, pages))
        nav = f'\n<nav class="site-nav"><ul>{nav}</ul></nav>\n'.encode()
        # Before the last </body> (every corpus page has one; a </body> in a script comes earlier).
        end = [m.start() for m in re.finditer(rb"</body\s*>", html, re.I)]
        at = end[-1] if end else len(html)
        name = "index.html" if i == 0 else os.path.join("p", f"{i}.html")
        with open(os.path.join(directory, name), "wb") as f:
            f.write(html[:at] + nav + html[at:])


class Nginx:
    """Debian's nginx serving one directory on 127.0.0.1, unprivileged paths all in `prefix`:
    a master and 2 workers in the foreground, stopped with SIGTERM to the master."""

    def __init__(self, prefix: str, root: str, port: int):
        self.prefix, self.port, self.workers = prefix, port, []
        # As root the workers would switch to nobody:nobody (no such group on Debian) and could
        # not read the 0700 temporary directories: they stay the caller, as without root.
        user = ""
        if os.geteuid() == 0:
            user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
        temp = "".join(f"  {kind}_temp_path {prefix}/{kind};\n"
                       for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        self.conf = os.path.join(prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(f"{user}worker_processes 2;\ndaemon off;\nerror_log {prefix}/error.log;\n"
                    f"pid {prefix}/nginx.pid;\nevents {{ worker_connections 1024; }}\n"
                    f"http {{\n  access_log off;\n{temp}"
                    "  types { text/html html; text/plain txt; }\n  default_type application/octet-stream;\n"
                    # 17 Zyte pages lack <meta charset>; say what they are, to both crawlers alike.
                    "  charset utf-8;\n  sendfile on;\n"
                    f"  server {{\n    listen 127.0.0.1:{port};\n    root {root};\n    index index.html;\n  }}\n}}\n")

    def __enter__(self) -> str:
        # -e: the error log before the configuration is read, which is otherwise /var/log/nginx's.
        self.proc = subprocess.Popen([NGINX, "-p", self.prefix, "-e", f"{self.prefix}/error.log", "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        origin = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 10
        while True:
            try:
                with urllib.request.urlopen(f"{origin}/robots.txt", timeout=2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise SystemExit(f"nginx did not start: {open(f'{self.prefix}/error.log').read()[-2000:]}")
                time.sleep(0.05)
        # The master answers before it has forked every worker.
        while len(self.workers) < 2 and time.time() < deadline:
            self.workers = children(self.proc.pid)
            time.sleep(0.02)
        log(f"nginx master {self.proc.pid}, workers {self.workers}, serving {origin}")
        return origin

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        """SIGTERM to the master (a fast shutdown: it ends its workers, then itself), then checks
        with ps that none of them is left; one that is gets SIGKILL and is reported."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        ours = {self.proc.pid, *self.workers}
        listing = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        # By pid and name: a pid reused meanwhile by another program is not ours.
        self.leftovers = [line.strip() for line in listing.splitlines()
                          if line.split() and int(line.split()[0]) in ours and "nginx" in line]
        for line in self.leftovers:
            log(f"warning: nginx process left after its master ended: {line}")
            os.kill(int(line.split()[0]), signal.SIGKILL)


def resident_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return sorted(found)


def run_webpilot(binary: str, origin: str, pages: int, idle_seconds: int = 0) -> dict:
    """One crawl on a fresh webpilot: a reused one would ask the site whether pages changed
    (If-None-Match) and take nginx's 304s for pages read in an earlier round. With
    `idle_seconds`, also its resident memory that long after the crawl and its report."""
    with tempfile.TemporaryDirectory(prefix="webpilot-bench-data-") as data_dir:
        config = os.path.join(data_dir, "webpilot.toml")
        with open(config, "w") as f:
            f.write(CRAWL_CONFIG)
        proc, api = start_webpilot(binary, data_dir, {"WEBPILOT_CONFIG": config})
        try:
            task, status, seconds = crawl_until_done(api, {
                "urls": [origin + "/"], "mode": "http", "extract": "main", "format": "markdown",
                "parallel": PARALLEL, "follow": {"depth": 20, "max_pages": pages}}, wait=STATUS_WAIT)
            # Before the report below: serializing every page's content at once is no part of
            # the crawl and would raise the high-water mark.
            rss = peak_rss_mib(proc.pid)
            # crawl_status pages its results; the REST task endpoint returns all of them.
            with urllib.request.urlopen(f"{api}/api/crawler/tasks/{task['task_id']}", timeout=600) as response:
                report = json.load(response)
            idle = None
            if idle_seconds:
                time.sleep(idle_seconds)
                idle = resident_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    results = len(report["results"])
    errors = [f"{e['url']}: {e['error'].get('code')} {e['error'].get('message', '')[:120]}" for e in report["errors"]]
    skipped = [f"{s['url']}: {s.get('reason')}" for s in report.get("skipped", [])]
    empty = sum(1 for r in report["results"] if not (r["result"].get("content") or "").strip())
    depth = max((r.get("depth", 0) for r in report["results"]), default=0)
    outcome = {"crawler": "webpilot", "pages": results, "seconds": round(seconds, 3),
               "pages_per_second": round(results / seconds, 1), "peak_rss_mib": round(rss, 1),
               "idle_rss_mib": idle and round(idle, 1),
               "status": status["status"], "total": status["total"], "errors": len(errors),
               "skipped": status.get("skipped_count", 0), "empty_content": empty, "max_depth": depth,
               "error_samples": errors[:5], "skipped_samples": skipped[:5]}
    if results != pages:
        log(f"warning: webpilot read {results} pages of {pages}: {json.dumps(outcome)}")
    return outcome


def ensure_venv(venv: str) -> str:
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        log("creating", venv)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    # trafilatura's jusText fallback needs lxml's HTML cleaner, a package of its own since lxml
    # 5.2 that trafilatura does not pull in: without it every extraction raises ImportError.
    packages = ["scrapy", "trafilatura", "lxml_html_clean"]
    if subprocess.run([python, "-c", "import " + ", ".join(packages)], capture_output=True).returncode != 0:
        log(f"installing {' '.join(packages)} (latest) from PyPI into {venv}")
        # pip's output to stderr: stdout is the Markdown report.
        subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", *packages],
                       check=True, stdout=sys.stderr)
    versions = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(' '.join(f'{p} {m.version(p)}' for p in "
                       "('scrapy', 'trafilatura', 'twisted', 'lxml', 'lxml_html_clean', 'parsel', 'protego')))"],
        check=True, capture_output=True, text=True).stdout.strip()
    log("peer:", versions)
    return python


def run_scrapy(python: str, spider: str, origin: str, pages: int, extract: bool) -> dict:
    name = "scrapy+trafilatura" if extract else "scrapy-fetch"
    done = subprocess.run([python, spider, origin, "extract" if extract else "fetch"],
                          capture_output=True, text=True, timeout=3600, cwd=os.path.dirname(spider))
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr[-3000:]}")
    outcome = json.loads(lines[-1])
    outcome.update(crawler=name, pages_per_second=round(outcome["pages"] / outcome["seconds"], 1))
    if done.stderr.strip():
        outcome["stderr_tail"] = done.stderr.strip()[-500:]
    if outcome["pages"] != pages:
        log(f"warning: {name} read {outcome['pages']} pages of {pages}: {json.dumps(outcome)}")
    return outcome


def summarize(runs: list[dict]) -> dict:
    rates = [r["pages_per_second"] for r in runs]
    rss = [r["peak_rss_mib"] for r in runs]
    return {"pages_per_second_median": round(statistics.median(rates), 1), "pages_per_second_min": min(rates),
            "pages_per_second_max": max(rates), "peak_rss_mib_median": round(statistics.median(rss), 1),
            "peak_rss_mib_max": max(rss), "pages_min": min(r["pages"] for r in runs),
            "pages_max": max(r["pages"] for r in runs), "runs": runs}


def serve_site(workdir: str, pages: int) -> Nginx:
    """Generates a site of `pages` pages under workdir and the nginx that will serve it."""
    port = free_port()
    site = os.path.join(workdir, "site")
    started = time.perf_counter()
    generate_site(site, f"http://127.0.0.1:{port}", pages)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(site, "**", "*.html"), recursive=True))
    log(f"generated {pages} pages ({size / 2**20:.0f} MiB) in {time.perf_counter() - started:.1f} s")
    return Nginx(workdir, site, port)


def report(args, crawlers: dict, ratio: dict, big: dict | None) -> str:
    lines = [f"| site crawl, {args.pages} pages (nginx, 16 at once) | pages read "
             f"| pages/s (median, min–max of {args.rounds}) | peak RSS MiB (median, max) |",
             "| --- | --- | --- | --- |"]
    labels = {"webpilot": "webpilot crawl_batch + follow (http, main, markdown)",
              "scrapy+trafilatura": "Scrapy + trafilatura (markdown)",
              "scrapy-fetch": "Scrapy, fetching only"}
    for name, row in crawlers.items():
        read = (str(row["pages_min"]) if row["pages_min"] == row["pages_max"]
                else f"{row['pages_min']}–{row['pages_max']}")
        lines.append(f"| {labels[name]} | {read} | {row['pages_per_second_median']} ({row['pages_per_second_min']}–"
                     f"{row['pages_per_second_max']}) | {row['peak_rss_mib_median']} ({row['peak_rss_mib_max']}) |")
    lines.append(f"| webpilot ÷ Scrapy + trafilatura | | {ratio['median']}× (worst case "
                 f"{ratio['worst_case']}×: slowest webpilot ÷ fastest Scrapy) | |")
    lines.append(f"| webpilot ÷ Scrapy fetching only | | {ratio['median_vs_fetch']}× | |")
    if big:
        mark = "met" if big["rss_within_limit"] else "**MISSED**"
        lines.append(f"| webpilot, {big['site_pages']} pages | {big['pages']} | {big['pages_per_second']} | "
                     f"{big['peak_rss_mib']} (≤ {RSS_LIMIT_MIB}: {mark}) |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "webpilot"))
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rss-pages", type=int, default=10000,
                        help="pages of the site of the webpilot-only peak-RSS crawl (0: skip it)")
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/webpilot-bench/scrapy-venv"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/site_crawl.json")
    args = parser.parse_args()
    if not os.path.exists(NGINX):
        raise SystemExit(f"{NGINX} is missing (scripts/setup --test installs nginx)")
    python = ensure_venv(args.venv)
    runs = {"webpilot": [], "scrapy+trafilatura": [], "scrapy-fetch": []}
    leftovers = []
    with tempfile.TemporaryDirectory(prefix="webpilot-bench-site-") as workdir:
        spider = os.path.join(workdir, "spider.py")
        with open(spider, "w") as f:
            f.write(SPIDER_PY)
        nginx = serve_site(workdir, args.pages)
        with nginx as origin:
            # Interleaved, so drift of the machine touches every crawler alike.
            for round_ in range(args.rounds):
                for name in runs:
                    if name == "webpilot":
                        outcome = run_webpilot(args.bin, origin, args.pages)
                    else:
                        outcome = run_scrapy(python, spider, origin, args.pages, name == "scrapy+trafilatura")
                    outcome["round"] = round_
                    log(json.dumps(outcome))
                    runs[name].append(outcome)
        leftovers += nginx.leftovers
    big = None
    if args.rss_pages:
        with tempfile.TemporaryDirectory(prefix="webpilot-bench-site-") as workdir:
            nginx = serve_site(workdir, args.rss_pages)
            with nginx as origin:
                big = run_webpilot(args.bin, origin, args.rss_pages, idle_seconds=30)
            leftovers += nginx.leftovers
        big.update(site_pages=args.rss_pages, rss_limit_mib=RSS_LIMIT_MIB,
                   rss_within_limit=big["peak_rss_mib"] <= RSS_LIMIT_MIB)
        log(json.dumps(big))
    crawlers = {name: summarize(r) for name, r in runs.items()}
    ours, theirs = crawlers["webpilot"], crawlers["scrapy+trafilatura"]
    ratio = {"median": round(ours["pages_per_second_median"] / theirs["pages_per_second_median"], 2),
             "worst_case": round(ours["pages_per_second_min"] / theirs["pages_per_second_max"], 2),
             "median_vs_fetch": round(ours["pages_per_second_median"]
                                      / crawlers["scrapy-fetch"]["pages_per_second_median"], 2)}
    result = {"pages": args.pages, "rounds": args.rounds, "parallel": PARALLEL, "crawlers": crawlers,
              "ratio_webpilot_to_scrapy_trafilatura": ratio, "rss_run": big, "nginx_leftovers": leftovers,
              "peer_versions": runs["scrapy+trafilatura"][0]["versions"]}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(report(args, crawlers, ratio, big))


if __name__ == "__main__":
    main()
