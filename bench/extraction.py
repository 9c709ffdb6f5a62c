#!/usr/bin/env python3
"""Extraction quality and speed of open_web_page on the shared corpora.

  python3 bench/extraction.py --bin target/release/webpilot [--out DIR]

Quality: serves every corpus page's source.html on 127.0.0.1, starts `webpilot serve` (fetches
of 127.0.0.1 allowed), calls the real tool (POST /api/tools/open_web_page, mode=http) for each
page, writes each result as YAML front matter `title: ...` + content, and scores both corpora
with shared/bench/score_extraction.py.

Speed: extraction + Markdown on the Zyte pages, single-threaded, in the same run: webpilot's
(`cargo bench --bench extraction`, i.e. the library function the tool calls) and Python
trafilatura 2.3 (`output_format="markdown"`, in a throwaway venv). Stdlib only here.
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from allocator import allocator_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
CORPORA = {"readability": "readability", "zyte": "article-extraction-benchmark"}
TARGETS = {"readability": 0.98, "zyte": 0.97, "title": 0.95, "speed": 3.0}
TRAFILATURA_PY = """
import os, sys, time, trafilatura
corpus = sys.argv[1]
pages = [open(os.path.join(corpus, d, 'source.html'), encoding='utf-8', errors='replace').read()
         for d in sorted(os.listdir(corpus)) if os.path.exists(os.path.join(corpus, d, 'source.html'))]
rounds = int(sys.argv[2])
start = time.perf_counter()
for _ in range(rounds):
    for html in pages:
        trafilatura.extract(html, output_format="markdown")
seconds = time.perf_counter() - start
print('{"pages_per_second": %.2f}' % (len(pages) * rounds / seconds))
"""


def log(*args):
    print("[extraction]", *args, file=sys.stderr, flush=True)


class CorpusHandler(http.server.SimpleHTTPRequestHandler):
    """Serves /<corpus>/<page>/source.html as UTF-8 HTML (17 Zyte pages lack <meta charset>)."""

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if len(parts) != 3 or parts[0] not in CORPORA or parts[2] != "source.html" or ".." in parts:
            self.send_error(404)
            return
        path = os.path.join(SHARED, "corpus", CORPORA[parts[0]], parts[1], "source.html")
        try:
            body = open(path, "rb").read()
        except OSError:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve_corpus() -> str:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), CorpusHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def start_webpilot(binary: str, data_dir: str, extra_env: dict | None = None):
    env = dict(os.environ, WEBPILOT_FETCH_ALLOW="127.0.0.1", WEBPILOT_LOG="info",
               **allocator_env(), **(extra_env or {}))
    proc = subprocess.Popen([binary, "--port", "0", "--data-dir", data_dir, "serve"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:
        match = re.search(r"http://\S+", line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, match.group(0)
    raise SystemExit("webpilot did not start")


def call(api: str, tool: str, args: dict) -> dict:
    request = urllib.request.Request(f"{api}/api/tools/{tool}", data=json.dumps(args).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        return json.load(error)


def run_quality(binary: str, out: str) -> dict:
    corpus_url = serve_corpus()
    with tempfile.TemporaryDirectory() as data_dir:
        proc, api = start_webpilot(binary, data_dir)
        try:
            results = {}
            for name, folder in CORPORA.items():
                corpus = os.path.join(SHARED, "corpus", folder)
                target = os.path.join(out, name)
                os.makedirs(target, exist_ok=True)
                pages = sorted(p for p in os.listdir(corpus) if os.path.isdir(os.path.join(corpus, p)))
                errors = 0
                for page in pages:
                    body = call(api, "open_web_page", {"url": f"{corpus_url}/{name}/{page}/source.html",
                                                       "mode": "http", "max_tokens": 10_000_000})
                    if "error" in body:
                        errors += 1
                        log(page, body["error"])
                        continue
                    title = json.dumps(body.get("title") or "", ensure_ascii=False)
                    with open(os.path.join(target, page + ".md"), "w") as f:
                        f.write(f"---\ntitle: {title}\n---\n\n{body['content']}\n")
                summary = os.path.join(out, f"{name}-score.json")
                subprocess.run([sys.executable, os.path.join(SHARED, "bench", "score_extraction.py"),
                                target, corpus, "--json", summary], check=True, stdout=subprocess.DEVNULL)
                scores = json.load(open(summary))["summary"]
                scores["errors"] = errors
                results[name] = scores
                log(name, json.dumps({k: scores.get(k) for k in ("macro", "title", "errors")}))
            return results
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def run_speed(venv: str) -> dict:
    zyte = os.path.join(SHARED, "corpus", CORPORA["zyte"])
    log("cargo bench --bench extraction")
    ours = subprocess.run(["cargo", "bench", "--locked", "--bench", "extraction", "--", zyte, "--rounds", "5"],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout
    ours = json.loads(ours.strip().splitlines()[-1])
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        log("creating", venv, "with trafilatura 2.3")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "trafilatura==2.3.*", "lxml_html_clean"], check=True)
    peer = subprocess.run([python, "-c", TRAFILATURA_PY, zyte, "2"], check=True, capture_output=True, text=True)
    peer = json.loads(peer.stdout.strip().splitlines()[-1])
    return {"webpilot_pages_per_second": ours["pages_per_second"],
            "trafilatura_pages_per_second": peer["pages_per_second"],
            "ratio": ours["pages_per_second"] / peer["pages_per_second"]}


def report(quality: dict, speed: dict | None) -> str:
    def macro(name):
        return quality[name]["macro"]["f1"]

    def mark(ok):
        return "met" if ok else "**MISSED**"

    title = quality["readability"]["title"]["exact_match_accuracy"]
    lines = ["| measure | webpilot | target | |", "| --- | --- | --- | --- |"]
    for name in CORPORA:
        lines.append(f"| word macro-F1, {name} pages ({quality[name]['pages']}) | {macro(name):.4f} | "
                     f">= {TARGETS[name]} | {mark(macro(name) >= TARGETS[name])} |")
    lines.append(f"| title exact match, readability pages | {title:.4f} | >= {TARGETS['title']} | "
                 f"{mark(title >= TARGETS['title'])} |")
    if speed:
        lines.append(f"| Zyte pages/s, single thread (Python trafilatura 2.3: "
                     f"{speed['trafilatura_pages_per_second']:.1f}) | {speed['webpilot_pages_per_second']:.1f} "
                     f"({speed['ratio']:.1f}x) | >= {TARGETS['speed']}x | {mark(speed['ratio'] >= TARGETS['speed'])} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "webpilot"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/extraction")
    parser.add_argument("--venv", default="/tmp/trafilatura-venv")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    quality = run_quality(args.bin, args.out)
    speed = None if args.skip_speed else run_speed(args.venv)
    json.dump({"quality": quality, "speed": speed}, open(os.path.join(args.out, "extraction.json"), "w"), indent=2)
    print(report(quality, speed))


if __name__ == "__main__":
    main()
