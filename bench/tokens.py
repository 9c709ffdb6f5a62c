#!/usr/bin/env python3
"""What an agent reads over a whole flow: webpilot (REST) against the peer (Playwright MCP), the
same scripted flows on the same pages in one run, counting the characters of every tool result
the agent is handed.

  /tmp/peer-venv/bin/python bench/tokens.py --bin target/release/webpilot [--out tokens.json]

Each flow is what an agent does to reach its goal and to see that it did, with each tool's own
calls:
- The peer's actions answer with a link to the page snapshot it wrote to a file, not the page: to
  know refs and what an action changed, an agent calls `browser_snapshot` after navigating and
  after each action whose effect it must see.
- webpilot's navigation result carries the element list, and an action's result only what
  changed (added, changed, removed elements, a count of the rest; after a scroll what came into
  view); `browser_interact wait` confirms a text.

Flows (pages from the peer's fixtures, plus an infinite feed from this repository):
- `login`: the login form, user and password, "Sign in", confirm "Welcome, alice".
- `spa`: the JS-rendered list, ready; add item 07 to the cart, search "Item 4", each confirmed.
- `elements_3_clicks`: the 200-element page, then three checkboxes ticked.
- `infinite_scroll`: a feed that fetches 20 posts at a time as it is scrolled, scrolled a page at a
  time until post 100 has been seen.

Target: webpilot's characters ≤ 0.3× the peer's on every flow.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import webpilot_driver as wd  # noqa: E402  (puts the peer's directory on sys.path)
import bench_common as bc  # noqa: E402
import bench_playwright_mcp as peer  # noqa: E402

sys.path.insert(0, bc.FIXTURES)
import serve  # noqa: E402  (the peer's fixture server: static pages and the cookie login)

FEED_PAGE = os.path.join(wd.REPO, "fixtures", "feed.html")
FEED_POSTS = 100
TARGET = 0.3
MAX_SCROLLS = 60
SCROLL_PX = 630
LOGIN_DONE = bc.LOGIN_DONE


class Handler(serve.Handler):
    """The peer's pages, and an infinite feed: `/feed.html` fetching `/feed?from=N&count=M`."""

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/feed.html":
            with open(FEED_PAGE, "rb") as f:
                return self.send(200, f.read())
        if url.path == "/feed":
            query = parse_qs(url.query)
            start = int(query.get("from", ["0"])[0])
            count = min(int(query.get("count", ["20"])[0]), 50)
            posts = [{"id": n, "title": f"Post {n}"} for n in range(start + 1, min(start + count, FEED_POSTS) + 1)]
            return self.send(200, json.dumps(posts).encode(), "application/json")
        return super().do_GET()


class Pages:
    def __enter__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


class Reading:
    """The characters of every result one flow handed the agent."""

    def __init__(self):
        self.chars = 0
        self.calls = 0

    def add(self, text: str) -> str:
        self.chars += len(text)
        self.calls += 1
        return text


# ---- the peer ------------------------------------------------------------------------------
async def peer_call(d, r: Reading, tool: str, args: dict) -> str:
    return r.add((await d.call(tool, args)).text)


async def peer_flows(d, base: str) -> dict:
    out = {}
    ref = bc.aria_ref

    r = Reading()
    await d.call("browser_navigate", {"url": f"{base}/logout"})
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/login"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    await peer_call(d, r, "browser_fill_form", {"fields": [
        {"target": ref(snap, "textbox", name), "name": name, "type": "textbox", "value": value, "element": name}
        for name, value in (("Username", bc.LOGIN_USER), ("Password", bc.LOGIN_PASSWORD))]})
    await peer_call(d, r, "browser_click", {"target": ref(snap, "button", "Sign in"), "element": "Sign in"})
    done = await peer_call(d, r, "browser_wait_for", {"text": LOGIN_DONE})
    bc.expect("Error" not in done[:40], done[:200])
    out["login"] = r

    r = Reading()
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/spa.html"})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_READY})
    snap = await peer_call(d, r, "browser_snapshot", {})
    await peer_call(d, r, "browser_click", {"target": ref(snap, *bc.SPA_CLICK_BUTTON), "element": "add"})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_CLICK_DONE})
    await peer_call(d, r, "browser_type", {"target": ref(snap, *bc.SPA_SEARCH_BOX), "element": "search",
                                            "text": bc.SPA_SEARCH_TEXT})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_SEARCH_DONE})
    out["spa"] = r

    r = Reading()
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/elements.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    for n in (1, 2, 3):
        await peer_call(d, r, "browser_click", {"target": ref(snap, "checkbox", f"Option {n}"), "element": f"Option {n}"})
        snap_after = await peer_call(d, r, "browser_snapshot", {})
    bc.expect(re.search(r'checkbox "Option 3" \[checked\]', snap_after) is not None, "Option 3 not ticked")
    out["elements_3_clicks"] = r

    r = Reading()
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/feed.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    for _ in range(MAX_SCROLLS):
        if f'"Post {FEED_POSTS}"' in snap:
            break
        # The same distance as webpilot's scroll (PageDown moves less, and by the focus).
        await peer_call(d, r, "browser_evaluate", {"function": f"() => window.scrollBy(0, {SCROLL_PX})"})
        snap = await peer_call(d, r, "browser_snapshot", {})
    bc.expect(f'"Post {FEED_POSTS}"' in snap, f"the peer never saw post {FEED_POSTS}")
    out["infinite_scroll"] = r
    return out


# ---- webpilot ------------------------------------------------------------------------------
async def wp_call(d, r: Reading, tool: str, args: dict) -> dict:
    text, data = await d.call_raw(tool, args)
    r.add(text)
    return data


def wp_ref(data: dict, role: str, name: str, field: str = "elements") -> int:
    listed = data.get(field) or data.get("content") or ""
    m = re.search(r"^[+~]? ?\[(\d+)\] " + re.escape(role) + r' "' + re.escape(name) + r'"', listed, re.M)
    if not m:
        raise LookupError(f'no {role} "{name}" in {listed[:400]!r}')
    return int(m.group(1))


async def wp_flows(d, base: str) -> dict:
    out = {}
    wait = {"action": "wait"}

    r = Reading()
    await d.call_raw("browser_navigate", {"target": f"{base}/logout"})
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/login"})
    for name, value in (("Username", bc.LOGIN_USER), ("Password", bc.LOGIN_PASSWORD)):
        await wp_call(d, r, "browser_interact", {"action": "type", "ref": wp_ref(page, "textbox", name), "text": value})
    await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(page, "button", "Sign in")})
    await wp_call(d, r, "browser_interact", {**wait, "until": LOGIN_DONE})
    out["login"] = r

    r = Reading()
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/spa.html", "wait_for": bc.SPA_READY})
    await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(page, *bc.SPA_CLICK_BUTTON)})
    await wp_call(d, r, "browser_interact", {**wait, "until": bc.SPA_CLICK_DONE})
    await wp_call(d, r, "browser_interact", {"action": "type", "ref": wp_ref(page, *bc.SPA_SEARCH_BOX),
                                             "text": bc.SPA_SEARCH_TEXT})
    await wp_call(d, r, "browser_interact", {**wait, "until": bc.SPA_SEARCH_DONE})
    out["spa"] = r

    r = Reading()
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/elements.html"})
    # The navigation lists the first elements within its budget; the rest is one read away.
    listed = await wp_call(d, r, "browser_read", {"mode": "elements", "cursor": page["elements_next_cursor"],
                                                  "max_tokens": wd.SNAPSHOT_MAX_TOKENS}) \
        if page.get("elements_next_cursor") else {}
    both = {"elements": (page.get("elements") or "") + "\n" + (listed.get("content") or "")}
    for n in (1, 2, 3):
        ticked = await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(both, "checkbox", f"Option {n}")})
    bc.expect("checked" in (ticked.get("changed") or ""), f"Option 3 not ticked: {ticked}")
    out["elements_3_clicks"] = r

    r = Reading()
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/feed.html", "wait_for": "20 posts"})
    seen = page.get("elements") or ""
    for _ in range(MAX_SCROLLS):
        if f'"Post {FEED_POSTS}"' in seen:
            break
        scrolled = await wp_call(d, r, "browser_interact", {"action": "scroll", "direction": "down", "amount": SCROLL_PX})
        seen = scrolled.get("added") or ""
    bc.expect(f'"Post {FEED_POSTS}"' in seen, f"webpilot never saw post {FEED_POSTS}")
    out["infinite_scroll"] = r
    return out


async def run(binary: str) -> dict:
    with Pages() as pages:
        async with peer.PlaywrightMCP([]) as d:
            theirs = await peer_flows(d, pages.base)
        async with wd.Webpilot(binary, []) as d:
            ours = await wp_flows(d, pages.base)
    rows = {}
    for flow in theirs:
        rows[flow] = {
            "webpilot_chars": ours[flow].chars, "webpilot_calls": ours[flow].calls,
            "peer_chars": theirs[flow].chars, "peer_calls": theirs[flow].calls,
            "ratio": round(ours[flow].chars / theirs[flow].chars, 3),
        }
    total_ours = sum(r["webpilot_chars"] for r in rows.values())
    total_theirs = sum(r["peer_chars"] for r in rows.values())
    rows["all"] = {"webpilot_chars": total_ours, "peer_chars": total_theirs,
                   "webpilot_calls": sum(o.calls for o in ours.values()),
                   "peer_calls": sum(t.calls for t in theirs.values()),
                   "ratio": round(total_ours / total_theirs, 3)}
    return rows


def report(rows: dict) -> str:
    lines = ["| flow | webpilot chars (calls) | Playwright MCP chars (calls) | ratio |", "|---|---:|---:|---:|"]
    for flow, row in rows.items():
        mark = "" if row["ratio"] <= TARGET else " (over target)"
        lines.append(f"| {flow} | {row['webpilot_chars']:,} ({row['webpilot_calls']}) | "
                     f"{row['peer_chars']:,} ({row['peer_calls']}) | {row['ratio']:.2f}×{mark} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=wd.DEFAULT_BIN)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = asyncio.run(run(args.bin))
    print(report(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if all(row["ratio"] <= TARGET for row in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
