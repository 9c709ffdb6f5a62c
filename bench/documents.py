#!/usr/bin/env python3
"""Documents to Markdown against Microsoft's MarkItDown, in one run.

    python3 bench/documents.py --bin target/release/webpilot [--rounds 5]

The documents are tests/make_documents.py's (python-docx, openpyxl, python-pptx, odfpy write
them, with what each holds): a report (.docx), a price list with formulas and a merged title
(.xlsx), a 50,000-row order sheet (.xlsx), a deck with speaker notes (.pptx), a CSV in
windows-1252 and an EPUB book; the OpenDocument files too, which MarkItDown does not read.

Each round, one after the other:
  * webpilot: a running `webpilot serve`, `open_web_page` (mode http, one slice) on each file
    served by Python's http.server on 127.0.0.1 — fetch, sniff, convert and JSON included;
  * MarkItDown: `MarkItDown().convert(path)` in process on the same files — no HTTP at all.

Content F1: word F1 of each output against the known text (for the order sheet, every cell).
Documents per second: the documents of the common set ÷ the seconds both took over them.
MarkItDown and the generators are installed from PyPI into --venv (outside the checkout).
Prints a Markdown table; the measurements go to --out as JSON.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extraction import ROOT, call, start_webpilot  # noqa: E402

PACKAGES = ["markitdown[docx,xlsx,xls,pptx]", "python-docx", "openpyxl", "python-pptx", "odfpy",
            "msoffcrypto-tool"]
COMMON = ["report.docx", "prices.xlsx", "orders.xlsx", "launch.pptx", "menu.csv", "voyage.epub"]
ONLY_OURS = ["notes.odt", "stock.ods"]

CONVERT = r"""
import json, sys, time
from markitdown import MarkItDown
names, folder, rounds = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
md = MarkItDown()
out, seconds = {}, []
for _ in range(rounds):
    started = time.perf_counter()
    for name in names:
        try:
            out[name] = md.convert(f"{folder}/{name}").text_content
        except Exception as error:
            out[name] = f"ERROR {type(error).__name__}: {error}"
    seconds.append(time.perf_counter() - started)
json.dump({"out": out, "seconds": seconds}, sys.stdout)
"""


def log(*args):
    print("[documents]", *args, file=sys.stderr, flush=True)


def ensure_venv(venv: str) -> str:
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        log("creating", venv)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    check = "import markitdown, docx, openpyxl, pptx, odf, msoffcrypto"
    if subprocess.run([python, "-c", check], capture_output=True).returncode != 0:
        log("installing", " ".join(PACKAGES), "from PyPI into", venv)
        subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", *PACKAGES],
                       check=True, stdout=sys.stderr)
    version = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('markitdown'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    log("peer: markitdown", version)
    return python


def words(text: str) -> Counter:
    return Counter(w.lower() for w in re.split(r"[^\w]+", text) if w)


def f1(truth: str, output: str) -> float:
    # Link destinations are not words a reader reads.
    output = re.sub(r"\]\([^)]*\)", "]", output)
    t, o = words(truth), words(output)
    common = sum((t & o).values())
    if not common:
        return 0.0
    precision, recall = common / sum(o.values()), common / sum(t.values())
    return 2 * precision * recall / (precision + recall)


def truth_words(truth: dict) -> dict:
    known = {name: entry["words"] for name, entry in truth.items() if "words" in entry}
    cells = ["Orders order customer amount city"]
    for i in range(1, 50_001):
        amount = round(i * 1.25, 2)
        amount = int(amount) if amount == int(amount) else amount
        cells.append(f"{i} customer {i % 977} {amount} {['Oslo', 'Lima', 'Pune'][i % 3]}")
    known["orders.xlsx"] = " ".join(cells)
    return known


def serve(folder: str) -> tuple[str, http.server.ThreadingHTTPServer]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=folder)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def run_webpilot(api: str, origin: str, names: list[str], rounds: int) -> tuple[dict, list[float]]:
    out, seconds = {}, []
    for _ in range(rounds):
        started = time.perf_counter()
        for name in names:
            page = call(api, "open_web_page", {"url": f"{origin}/{name}", "mode": "http",
                                               "max_tokens": 10_000_000})
            out[name] = page.get("content") or f"ERROR {page.get('error')}"
        seconds.append(time.perf_counter() - started)
    return out, seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/webpilot"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/webpilot-bench/markitdown-venv"))
    parser.add_argument("--out", default="/tmp/webpilot-bench/documents.json")
    args = parser.parse_args()
    python = ensure_venv(args.venv)
    with tempfile.TemporaryDirectory(prefix="webpilot-documents-") as folder, \
            tempfile.TemporaryDirectory(prefix="webpilot-bench-data-") as data_dir:
        made = subprocess.run([python, os.path.join(ROOT, "tests/make_documents.py"), folder],
                              check=True, capture_output=True, text=True)
        truth = truth_words(json.loads(made.stdout))
        origin, server = serve(folder)
        proc, api = start_webpilot(args.bin, data_dir)
        try:
            run_webpilot(api, origin, COMMON + ONLY_OURS, 1)  # warm-up
            ours, our_seconds = run_webpilot(api, origin, COMMON, args.rounds)
            ours_extra, _ = run_webpilot(api, origin, ONLY_OURS, 1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            server.shutdown()
        converted = subprocess.run([python, "-c", CONVERT, json.dumps(COMMON), folder, "1"],
                                   check=True, capture_output=True, text=True)  # warm-up
        converted = subprocess.run([python, "-c", CONVERT, json.dumps(COMMON), folder, str(args.rounds)],
                                   check=True, capture_output=True, text=True)
        peer = json.loads(converted.stdout)
    for name, text in peer["out"].items():
        if text.startswith("ERROR"):
            log(f"MarkItDown on {name}: {text[:300]}")
    rows, result = [], {"rounds": args.rounds, "documents": {}}
    for name in COMMON + ONLY_OURS:
        mine = f1(truth[name], ours.get(name) or ours_extra.get(name, ""))
        theirs = f1(truth[name], peer["out"][name]) if name in peer["out"] else None
        result["documents"][name] = {"webpilot_f1": round(mine, 4),
                                     "markitdown_f1": None if theirs is None else round(theirs, 4)}
        rows.append(f"| {name} | {mine:.3f} | {'—' if theirs is None else f'{theirs:.3f}'} |")
    ours_rate = [len(COMMON) / s for s in our_seconds]
    peer_rate = [len(COMMON) / s for s in peer["seconds"]]
    result.update(webpilot_docs_per_s=ours_rate, markitdown_docs_per_s=peer_rate)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    median = statistics.median
    print("| document | webpilot F1 | MarkItDown F1 |\n| --- | --- | --- |")
    print("\n".join(rows))
    print(f"\ndocuments per second over the {len(COMMON)} common ones, median of {args.rounds} rounds "
          f"(range): webpilot {median(ours_rate):.1f} ({min(ours_rate):.1f}–{max(ours_rate):.1f}), "
          f"MarkItDown {median(peer_rate):.2f} ({min(peer_rate):.2f}–{max(peer_rate):.2f}): "
          f"{median(ours_rate) / median(peer_rate):.1f}×")


if __name__ == "__main__":
    main()
