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

Flows (pages from the peer's fixtures, plus an infinite feed, a long form and a virtual list from
this repository's `fixtures/`):
- `login`: the login form, user and password, "Sign in", confirm "Welcome, alice".
- `spa`: the JS-rendered list, ready; add item 07 to the cart, search "Item 4", each confirmed.
- `elements_3_clicks`: the 200-element page, then three checkboxes ticked.
- `infinite_scroll`: a feed that fetches 20 posts at a time as it is scrolled, scrolled a page at a
  time until post 100 has been seen.
- `form_30_fields`: a membership application of 30 labelled controls (text, email, tel, number,
  date, selects, radio groups, checkboxes, a textarea), filled field by field by ref from the
  first listing (the peer: browser_type, browser_select_option, browser_click; webpilot:
  browser_interact type, select, click), "Submit application", confirm "Application received"
  (the server says so only when every required field came through).
- `virtual_list`: 1,000 orders in a windowed list that reuses its row nodes, inside a scrolling
  div; scrolled by the default distance (webpilot's scroll; the peer's script scrolls what is
  under the viewport centre by as much) until "Order 734" is in view, clicked, confirm "Order 734"
  on its page.

Target: webpilot's characters ≤ 0.5× the peer's on every flow, and ≤ 0.2× over all flows together.
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

# Pages of this repository's fixtures/, by the path they are served at.
REPO_PAGES = {"/feed.html": "feed.html", "/long-form.html": "long-form.html",
              "/virtual-list.html": "virtual-list.html"}
FEED_POSTS = 100
TARGET = 0.5          # every flow
TOTAL_TARGET = 0.2    # all flows together
ALL = "all flows"
MAX_SCROLLS = 60
SCROLL_PX = 630
LOGIN_DONE = bc.LOGIN_DONE
FORM_DONE = "Application received"
ORDER = 734
ORDER_ROW = f"Order {ORDER}"

# The long form as an agent fills it, control by control: (role, label, value); a checkbox or
# radio is clicked, a combobox (select) set by its option's label, anything else typed into.
FORM_FIELDS = [
    ("textbox", "First name", "Ada"), ("textbox", "Last name", "Lovelace"),
    ("textbox", "Email", "ada@example.com"), ("textbox", "Phone", "+44 20 7946 0958"),
    ("textbox", "Date of birth", "1990-12-10"), ("combobox", "Nationality", "British"),
    ("textbox", "Street address", "12 Ockham Lane"), ("textbox", "Apartment, suite (optional)", "Flat 2"),
    ("textbox", "City", "London"), ("textbox", "Postcode", "N1 9GU"),
    ("combobox", "Country", "United Kingdom"), ("radio", "Standard plan", ""),
    ("spinbutton", "Household size", "3"), ("textbox", "First delivery", "2027-03-15"),
    ("combobox", "Delivery window", "Evening (17–21)"), ("radio", "Contact by email", ""),
    ("checkbox", "Newsletter", ""), ("checkbox", "Weekly recipes", ""),
    ("textbox", "Name on card", "Ada Lovelace"), ("textbox", "Card number", "4242 4242 4242 4242"),
    ("textbox", "Expiry date (MM/YY)", "08/29"), ("textbox", "Security code", "123"),
    ("textbox", "Delivery instructions (optional)", "Leave the box by the side gate."),
    ("checkbox", "I accept the terms and conditions", ""), ("checkbox", "I am 18 or older", ""),
]
# The form's required fields (by name), checked by the server before it answers FORM_DONE.
APPLICATION_REQUIRED = ["first_name", "last_name", "email", "phone", "birth_date", "nationality", "street",
                        "city", "postcode", "country", "plan", "household", "start_date", "delivery_window",
                        "contact", "card_name", "card_number", "card_expiry", "card_cvc", "terms", "adult"]
# The peer's scroll of the virtual list: what webpilot's default scroll does (a wheel of 0.8× the
# viewport height at its centre, which scrolls the div under it), done by script, as the peer's
# infinite_scroll flow scrolls.
SCROLL_UNDER_CENTRE = (
    "() => { let el = document.elementFromPoint(innerWidth / 2, innerHeight / 2);"
    " while (el && !(el.scrollHeight > el.clientHeight && /auto|scroll/.test(getComputedStyle(el).overflowY)))"
    " el = el.parentElement;"
    " (el || document.scrollingElement).scrollBy(0, Math.round(innerHeight * 0.8)); }")


class Handler(serve.Handler):
    """The peer's pages, and this repository's: an infinite feed (`/feed.html` fetching
    `/feed?from=N&count=M`), a long form posting to `/application`, and a virtual list of orders
    linking to `/orders/N`."""

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path in REPO_PAGES:
            with open(os.path.join(wd.REPO, "fixtures", REPO_PAGES[url.path]), "rb") as f:
                return self.send(200, f.read())
        if url.path == "/feed":
            query = parse_qs(url.query)
            start = int(query.get("from", ["0"])[0])
            count = min(int(query.get("count", ["20"])[0]), 50)
            posts = [{"id": n, "title": f"Post {n}"} for n in range(start + 1, min(start + count, FEED_POSTS) + 1)]
            return self.send(200, json.dumps(posts).encode(), "application/json")
        order = re.fullmatch(r"/orders/(\d+)", url.path)
        if order:
            title = f"Order {int(order.group(1))}"
            return self.send(200, serve.page(title, f"<h1>{title}</h1><p>3 items, shipped.</p>"
                                                    "<a href='/virtual-list.html'>Back to orders</a>"))
        return super().do_GET()

    def do_POST(self):
        if urlsplit(self.path).path != "/application":
            return super().do_POST()
        n = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(n).decode("utf-8", "replace"))   # blank values left out
        missing = [name for name in APPLICATION_REQUIRED if name not in form]
        if missing:
            return self.send(422, serve.page("Application incomplete", "<h1>Application incomplete</h1>"
                                             f"<p>Missing: {', '.join(missing)}</p>"))
        return self.send(200, serve.page(FORM_DONE, f"<h1>{FORM_DONE}</h1>"
                                         "<p>Thank you. Your first box is on its way.</p>"))


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
        self.texts: list[str] = []

    def add(self, text: str) -> str:
        self.chars += len(text)
        self.calls += 1
        self.texts.append(text)
        return text


# ---- the peer ------------------------------------------------------------------------------
async def peer_call(d, r: Reading, tool: str, args: dict) -> str:
    return r.add((await d.call(tool, args)).text)


async def peer_login(d, r: Reading, base: str):
    ref = bc.aria_ref
    await d.call("browser_navigate", {"url": f"{base}/logout"})
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/login"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    await peer_call(d, r, "browser_fill_form", {"fields": [
        {"target": ref(snap, "textbox", name), "name": name, "type": "textbox", "value": value, "element": name}
        for name, value in (("Username", bc.LOGIN_USER), ("Password", bc.LOGIN_PASSWORD))]})
    await peer_call(d, r, "browser_click", {"target": ref(snap, "button", "Sign in"), "element": "Sign in"})
    done = await peer_call(d, r, "browser_wait_for", {"text": LOGIN_DONE})
    bc.expect("Error" not in done[:40], done[:200])


async def peer_spa(d, r: Reading, base: str):
    ref = bc.aria_ref
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/spa.html"})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_READY})
    snap = await peer_call(d, r, "browser_snapshot", {})
    await peer_call(d, r, "browser_click", {"target": ref(snap, *bc.SPA_CLICK_BUTTON), "element": "add"})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_CLICK_DONE})
    await peer_call(d, r, "browser_type", {"target": ref(snap, *bc.SPA_SEARCH_BOX), "element": "search",
                                           "text": bc.SPA_SEARCH_TEXT})
    await peer_call(d, r, "browser_wait_for", {"text": bc.SPA_SEARCH_DONE})


async def peer_elements(d, r: Reading, base: str):
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/elements.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    for n in (1, 2, 3):
        target = bc.aria_ref(snap, "checkbox", f"Option {n}")
        await peer_call(d, r, "browser_click", {"target": target, "element": f"Option {n}"})
        snap_after = await peer_call(d, r, "browser_snapshot", {})
    bc.expect(re.search(r'checkbox "Option 3" \[checked\]', snap_after) is not None, "Option 3 not ticked")


async def peer_scroll_until(d, r: Reading, snap: str, seen: str, scroll: str) -> str:
    """Scrolls by `scroll` (a script) and snapshots until `seen` is in the snapshot; the last one."""
    for _ in range(MAX_SCROLLS):
        if seen in snap:
            return snap
        await peer_call(d, r, "browser_evaluate", {"function": scroll})
        snap = await peer_call(d, r, "browser_snapshot", {})
    bc.expect(seen in snap, f"the peer never saw {seen} in {MAX_SCROLLS} scrolls")
    return snap


async def peer_feed(d, r: Reading, base: str):
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/feed.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    # The same distance as webpilot's scroll (PageDown moves less, and by the focus).
    await peer_scroll_until(d, r, snap, f'"Post {FEED_POSTS}"', f"() => window.scrollBy(0, {SCROLL_PX})")


def peer_fill(target: str, role: str, name: str, value: str) -> tuple[str, dict]:
    """The peer's own tool for one control."""
    if role == "combobox":
        return "browser_select_option", {"target": target, "element": name, "values": [value]}
    if role in ("checkbox", "radio"):
        return "browser_click", {"target": target, "element": name}
    return "browser_type", {"target": target, "element": name, "text": value}


async def peer_form(d, r: Reading, base: str):
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/long-form.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    for role, name, value in FORM_FIELDS:
        await peer_call(d, r, *peer_fill(bc.aria_ref(snap, role, name), role, name, value))
    submit = bc.aria_ref(snap, "button", "Submit application")
    await peer_call(d, r, "browser_click", {"target": submit, "element": "Submit application"})
    await peer_call(d, r, "browser_wait_for", {"text": FORM_DONE})


async def peer_virtual_list(d, r: Reading, base: str):
    await peer_call(d, r, "browser_navigate", {"url": f"{base}/virtual-list.html"})
    snap = await peer_call(d, r, "browser_snapshot", {})
    snap = await peer_scroll_until(d, r, snap, f'"{ORDER_ROW}"', SCROLL_UNDER_CENTRE)
    clicked = await peer_call(d, r, "browser_click", {"target": bc.aria_ref(snap, "link", ORDER_ROW),
                                                      "element": ORDER_ROW})
    bc.expect(f"/orders/{ORDER}" in clicked, f"clicking {ORDER_ROW} did not open /orders/{ORDER}: {clicked[:400]}")
    await peer_call(d, r, "browser_wait_for", {"text": ORDER_ROW})


PEER_FLOWS = {"login": peer_login, "spa": peer_spa, "elements_3_clicks": peer_elements,
              "infinite_scroll": peer_feed, "form_30_fields": peer_form, "virtual_list": peer_virtual_list}


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


def wp_news(data: dict) -> str:
    """The element lines a result lists: a navigation's, or what an action added, changed or
    relisted."""
    return "\n".join(data.get(key) or "" for key in ("elements", "added", "changed", "relisted"))


async def wp_listing(d, r: Reading, page: dict) -> dict:
    """The navigation's element list, and the rest of it (one read) when its budget cut it."""
    listed = await wp_call(d, r, "browser_read", {"mode": "elements", "cursor": page["elements_next_cursor"],
                                                  "max_tokens": wd.SNAPSHOT_MAX_TOKENS}) \
        if page.get("elements_next_cursor") else {}
    return {"elements": (page.get("elements") or "") + "\n" + (listed.get("content") or "")}


async def wp_login(d, r: Reading, base: str):
    await d.call_raw("browser_navigate", {"target": f"{base}/logout"})
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/login"})
    for name, value in (("Username", bc.LOGIN_USER), ("Password", bc.LOGIN_PASSWORD)):
        await wp_call(d, r, "browser_interact", {"action": "type", "ref": wp_ref(page, "textbox", name), "text": value})
    await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(page, "button", "Sign in")})
    await wp_call(d, r, "browser_interact", {"action": "wait", "until": LOGIN_DONE})


async def wp_spa(d, r: Reading, base: str):
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/spa.html", "wait_for": bc.SPA_READY})
    await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(page, *bc.SPA_CLICK_BUTTON)})
    await wp_call(d, r, "browser_interact", {"action": "wait", "until": bc.SPA_CLICK_DONE})
    await wp_call(d, r, "browser_interact", {"action": "type", "ref": wp_ref(page, *bc.SPA_SEARCH_BOX),
                                             "text": bc.SPA_SEARCH_TEXT})
    await wp_call(d, r, "browser_interact", {"action": "wait", "until": bc.SPA_SEARCH_DONE})


async def wp_elements(d, r: Reading, base: str):
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/elements.html"})
    both = await wp_listing(d, r, page)
    for n in (1, 2, 3):
        ticked = await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(both, "checkbox", f"Option {n}")})
    bc.expect("checked" in (ticked.get("changed") or ""), f"Option 3 not ticked: {ticked}")


async def wp_feed(d, r: Reading, base: str):
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/feed.html", "wait_for": "20 posts"})
    seen = page.get("elements") or ""
    for _ in range(MAX_SCROLLS):
        if f'"Post {FEED_POSTS}"' in seen:
            break
        scrolled = await wp_call(d, r, "browser_interact", {"action": "scroll", "direction": "down", "amount": SCROLL_PX})
        seen = scrolled.get("added") or ""
    bc.expect(f'"Post {FEED_POSTS}"' in seen, f"webpilot never saw post {FEED_POSTS}")


def wp_fill(ref: int, role: str, value: str) -> dict:
    """browser_interact for one control."""
    if role == "combobox":
        return {"action": "select", "ref": ref, "option": value}
    if role in ("checkbox", "radio"):
        return {"action": "click", "ref": ref}
    return {"action": "type", "ref": ref, "text": value}


async def wp_form(d, r: Reading, base: str):
    page = await wp_call(d, r, "browser_navigate", {"target": f"{base}/long-form.html"})
    listed = await wp_listing(d, r, page)
    for role, name, value in FORM_FIELDS:
        filled = await wp_call(d, r, "browser_interact", wp_fill(wp_ref(listed, role, name), role, value))
        bc.expect("value_mismatch" not in filled, f"{name}: {filled}")
    await wp_call(d, r, "browser_interact", {"action": "click", "ref": wp_ref(listed, "button", "Submit application")})
    await wp_call(d, r, "browser_interact", {"action": "wait", "until": FORM_DONE})


async def wp_virtual_list(d, r: Reading, base: str):
    seen = await wp_call(d, r, "browser_navigate", {"target": f"{base}/virtual-list.html"})
    for _ in range(MAX_SCROLLS):
        if f'link "{ORDER_ROW}"' in wp_news(seen):
            break
        seen = await wp_call(d, r, "browser_interact", {"action": "scroll", "direction": "down"})
    bc.expect(f'link "{ORDER_ROW}"' in wp_news(seen), f"webpilot never saw {ORDER_ROW} in {MAX_SCROLLS} scrolls")
    row = wp_ref({"elements": wp_news(seen)}, "link", ORDER_ROW)
    clicked = await wp_call(d, r, "browser_interact", {"action": "click", "ref": row})
    bc.expect(clicked.get("navigated") is True, f"clicking {ORDER_ROW} did not navigate: {clicked}")
    await wp_call(d, r, "browser_interact", {"action": "wait", "until": ORDER_ROW})


WP_FLOWS = {"login": wp_login, "spa": wp_spa, "elements_3_clicks": wp_elements,
            "infinite_scroll": wp_feed, "form_30_fields": wp_form, "virtual_list": wp_virtual_list}


# ---- the run -------------------------------------------------------------------------------
async def run_flows(flows: dict, d, base: str) -> dict:
    readings = {}
    for name, flow in flows.items():
        readings[name] = Reading()
        await flow(d, readings[name], base)
    return readings


def row_of(ours: list[Reading], theirs: list[Reading], target: float) -> dict:
    mine, peers = sum(o.chars for o in ours), sum(t.chars for t in theirs)
    return {"webpilot_chars": mine, "webpilot_calls": sum(o.calls for o in ours),
            "peer_chars": peers, "peer_calls": sum(t.calls for t in theirs),
            "ratio": round(mine / peers, 3), "target": target}


def dump(readings: dict, side: str, folder: str):
    """Every result of every flow, one file per flow, to see where the characters go."""
    os.makedirs(folder, exist_ok=True)
    for flow, reading in readings.items():
        with open(os.path.join(folder, f"{side}-{flow}.txt"), "w") as f:
            f.write("\n\n----\n".join(reading.texts))


async def run(binary: str, dump_to: str | None = None) -> dict:
    with Pages() as pages:
        async with peer.PlaywrightMCP([]) as d:
            theirs = await run_flows(PEER_FLOWS, d, pages.base)
        async with wd.Webpilot(binary, []) as d:
            ours = await run_flows(WP_FLOWS, d, pages.base)
    if dump_to:
        dump(ours, "webpilot", dump_to)
        dump(theirs, "peer", dump_to)
    rows = {flow: row_of([ours[flow]], [theirs[flow]], TARGET) for flow in theirs}
    rows[ALL] = row_of(list(ours.values()), list(theirs.values()), TOTAL_TARGET)
    return rows


def report(rows: dict) -> str:
    lines = ["| flow | webpilot chars (calls) | Playwright MCP chars (calls) | ratio | target |",
             "|---|---:|---:|---:|---:|"]
    for flow, row in rows.items():
        mark = "" if row["ratio"] <= row["target"] else " (over target)"
        lines.append(f"| {flow} | {row['webpilot_chars']:,} ({row['webpilot_calls']}) | "
                     f"{row['peer_chars']:,} ({row['peer_calls']}) | {row['ratio']:.2f}×{mark} | "
                     f"≤ {row['target']}× |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=wd.DEFAULT_BIN)
    ap.add_argument("--out")
    ap.add_argument("--dump", help="a folder to write every result to, one file per flow and side")
    args = ap.parse_args()
    rows = asyncio.run(run(args.bin, args.dump))
    print(report(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)
    return 0 if all(row["ratio"] <= row["target"] for row in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
