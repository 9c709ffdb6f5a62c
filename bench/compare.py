#!/usr/bin/env python3
"""Side-by-side Markdown report of a webpilot bench run against the peer (Playwright MCP) run.

  python3 bench/compare.py --peer /tmp/peer.json --webpilot /tmp/webpilot.json \
      [--webpilot-mcp /tmp/webpilot-mcp.json]

Inputs are the `--out` JSON files of bench_playwright_mcp.py and bench/webpilot_driver.py (REST,
and optionally `--transport mcp`: then the same targets are checked over MCP stdio too, the way
the peer itself is driven, with the per-call cost of MCP over REST).
Stdlib only. Exit status 0 (targets are reported, not enforced) unless --strict is given, then
1 when a target with data is missed.
"""
from __future__ import annotations

import argparse
import json
import sys

# The targets. Operation targets compare a webpilot row with a peer row: ratio <= factor.
OP_TARGETS = {
    # webpilot row: (peer row, max ratio, label)
    "navigate_spa_ready/webpilot_navigate_only": ("navigate_spa_ready", 1.0, "<= 1.0x peer navigate+wait_for"),
    "navigate_spa_ready/webpilot_navigate_wait_for": ("navigate_spa_ready", 0.95, "<= 0.95x peer navigate+wait_for"),
    "snapshot_elements": ("snapshot_elements", 1.0, "<= peer (200-element list)"),
    "click_button": ("click_button", 0.25, "<= 0.25x peer browser_click (until settled)"),
    "type_search": ("type_search", 1.0, "<= peer browser_type"),
    "login_flow": ("login_flow", 0.40, "<= 0.4x peer (navigate, read, fill, submit, welcome)"),
    "screenshot": ("screenshot", 1.0, "<= peer (viewport PNG)"),
    "screenshot_annotated": ("screenshot", 1.5, "<= 1.5x peer plain screenshot"),
    "ensure_login": ("login_flow", 0.5, "<= 0.5x peer login flow via the form"),
}
SNAPSHOT_CHARS_FACTOR = 0.5
ELEMENTS_ON_PAGE = 200
TOOLS_CHARS_MAX = 10_000
OWN_RSS_MAX_MIB = 50


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt_ms(st):
    if not st:
        return "n/a"
    return f"{st['median']:.1f} ({st['min']:.1f}–{st['max']:.1f})"


def verdict(ok):
    if ok is None:
        return "n/a"
    return "met" if ok else "**MISSED**"


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}x"


def med(res, section, key):
    st = res.get(section, {}).get(key)
    return st["median"] if st else None


def mcp_section(p, mcp, rest, peer, missed, run_line):
    """The targeted operations again, webpilot driven over MCP stdio by the same SDK client as
    the peer; MCP − REST is what the MCP front adds per call."""
    p("## Over MCP stdio (the peer's transport and client)")
    p("")
    p(f"- {run_line(mcp)}")
    p("")
    p("| operation | webpilot MCP | webpilot REST | MCP − REST | peer | MCP ratio | target | status |")
    p("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, (peer_key, factor, label) in OP_TARGETS.items():
        m, r, pst = mcp["ops_ms"].get(k), rest["ops_ms"].get(k), peer["ops_ms"].get(peer_key)
        if m is None:
            p(f"| `{k}` | n/a | | | | | {label} | n/a |")
            continue
        q = ratio(m["median"], pst["median"] if pst else None)
        ok = None if q is None else q <= factor
        if ok is False:
            missed.append(f"MCP {k}: {q:.2f}x {label}")
        extra = f"{m['median'] - r['median']:+.1f}" if r else "n/a"
        p(f"| `{k}` | {fmt_ms(m)} | {r['median']:.1f} | {extra} | "
          f"{pst['median']:.1f} ({peer_key}) | {fmt_ratio(q)} | {label} | {verdict(ok)} |" if pst and r else
          f"| `{k}` | {fmt_ms(m)} | n/a | {extra} | n/a | | {label} | n/a |")
    session = (mcp["startup"].get("session_ms"), peer["startup"].get("session_ms"))
    p(f"| session start (spawn + initialize) | {session[0]} | | | {session[1]} | "
      f"{fmt_ratio(ratio(*session))} | | |")
    p("")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--webpilot", required=True)
    ap.add_argument("--webpilot-mcp", help="webpilot_driver.py --transport mcp results")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target with data is missed")
    a = ap.parse_args()
    peer, wp = load(a.peer), load(a.webpilot)
    missed = []
    out = []
    p = out.append

    def run_line(res):
        e = res["env"]
        busy = e["other_processes_cpu_s"] / max(e["run_wall_s"], 0.1)
        flag = " — **CONTENDED** (other processes busy; rerun on a quiet machine)" if busy > 0.25 else ""
        return (f"{res['tool']['name']} {res['tool'].get('version', '')}: {res['reps_ok']}/{res['reps']} reps ok "
                f"(warm-up {res['warmup']}), {e['run_wall_s']} s wall, other processes {e['other_processes_cpu_s']} "
                f"CPU-s ({busy:.0%} of one core){flag}")

    p("# webpilot vs Playwright MCP")
    p("")
    p(f"- {run_line(wp)}")
    p(f"- {run_line(peer)}")
    p(f"- machine: {wp['env'].get('cpus')} CPUs, {wp['env'].get('platform')}, {wp['env'].get('chromium')}")
    p("")

    # -- operations ----------------------------------------------------------
    p("## Latency (ms per call, median (min–max))")
    p("")
    p("| operation | webpilot | peer | ratio | target | status |")
    p("| --- | --- | --- | --- | --- | --- |")
    na = wp.get("not_implemented", {})
    rows = list(peer["ops_ms"])
    for k in wp["ops_ms"]:
        if k not in rows:
            # webpilot-only rows go right after the peer row they compare with
            anchor = OP_TARGETS.get(k, (None,))[0]
            idx = rows.index(anchor) + 1 if anchor in rows else len(rows)
            while idx < len(rows) and rows[idx] not in peer["ops_ms"]:
                idx += 1
            rows.insert(idx, k)
    for k in rows:
        w = wp["ops_ms"].get(k)
        target = OP_TARGETS.get(k)
        peer_key = target[0] if target else k
        pst = peer["ops_ms"].get(peer_key)
        r = ratio(w["median"] if w else None, pst["median"] if pst else None)
        peer_cell = f"{pst['median']:.1f}" if pst else "—"
        if target and peer_key != k and pst:
            peer_cell += f" ({peer_key})"
        name = f"`{k}`"
        if w is None:
            reason = na.get(k)
            cell = "n/a" + (" (not implemented)" if reason else " (missing)")
            p(f"| {name} | {cell} | {peer_cell} | — | {target[2] if target else ''} | {verdict(None) if target else ''} |")
            continue
        ok = None
        if target and r is not None:
            ok = r <= target[1]
            if not ok:
                missed.append(f"{k}: {r:.2f}x {target[2]}")
        p(f"| {name} | {fmt_ms(w)} | {peer_cell} | {fmt_ratio(r)} | {target[2] if target else ''} | "
          f"{verdict(ok) if target else ''} |")
    for key, label in (("session_ms", "session start"), ("first_navigate_ms", "first navigate (browser launch)")):
        wv, pv = wp["startup"].get(key), peer["startup"].get(key)
        p(f"| {label} | {wv if wv is not None else 'n/a'} | {pv if pv is not None else 'n/a'} | "
          f"{fmt_ratio(ratio(wv, pv))} | | |")
    p("")
    p("The peer's `navigate_spa_ready` is browser_navigate + browser_wait_for; webpilot's row of the same name is "
      "browser_navigate + polling browser_read mode=text. `webpilot_navigate_only` is browser_navigate alone (its "
      "result must already list \"Add Item 50 to cart\"), `webpilot_navigate_wait_for` passes wait_for to browser_navigate.")
    p("")

    if a.webpilot_mcp:
        mcp_section(p, load(a.webpilot_mcp), wp, peer, missed, run_line)

    # -- sizes -------------------------------------------------------------------
    p("## Sizes (chars the agent reads; ~tokens = chars/4)")
    p("")
    p("| what | webpilot | peer | ratio | target | status |")
    p("| --- | --- | --- | --- | --- | --- |")
    ws, ps = wp["sizes"], peer["sizes"]

    def size(res_sizes, key):
        st = res_sizes.get(key)
        return st["median"] if st else None

    # The 200-element page
    w_el, p_el = size(ws, "snapshot_elements.chars"), size(ps, "snapshot_elements.chars")
    w_el_content = size(ws, "snapshot_elements.content_chars")
    w_count = size(ws, "snapshot_elements.elements_listed")
    w_total = size(ws, "snapshot_elements.elements_total")
    r = ratio(w_el, p_el)
    all_present = w_count is not None and w_count >= ELEMENTS_ON_PAGE and w_total == w_count
    ok = None if r is None else (r <= SNAPSHOT_CHARS_FACTOR and all_present)
    if ok is False:
        missed.append(f"elements snapshot: {r:.2f}x chars, {w_count} elements listed")
    w_cell = "n/a" if w_el is None else (f"{w_el:.0f} (response JSON; list itself {w_el_content:.0f}), "
                                         f"{w_count:.0f} elements listed of {w_total:.0f}")
    p(f"| elements snapshot, 200-element page | {w_cell} | {p_el:.0f} | {fmt_ratio(r)} | "
      f"<= {SNAPSHOT_CHARS_FACTOR}x peer, all {ELEMENTS_ON_PAGE} present | {verdict(ok)} |" if p_el is not None else
      f"| elements snapshot, 200-element page | {w_cell} | n/a | | | |")
    for key, label in (("snapshot_spa", "SPA snapshot (elements)"),
                       ("snapshot_article", "article snapshot (webpilot: markdown)"),
                       ("login_flow/snapshot", "login page snapshot")):
        wv, pv = size(ws, f"{key}.chars"), size(ps, f"{key}.chars")
        if wv is None:
            wv = size(ws, f"{key}.response_chars")
        if pv is None:
            pv = size(ps, f"{key}.response_chars")
        wc = size(ws, f"{key}.content_chars") if key != "login_flow/snapshot" else size(ws, "snapshot_login_flow.content_chars")
        extra = f" (content {wc:.0f})" if wc is not None else ""
        p(f"| {label} | {'n/a' if wv is None else f'{wv:.0f}'}{extra} | {'n/a' if pv is None else f'{pv:.0f}'} | "
          f"{fmt_ratio(ratio(wv, pv))} | | |")
    for key, label in (("navigate_spa_ready/navigate", "navigate response, SPA"),
                       ("navigate_static_elements", "navigate response, 200-element page")):
        wv, pv = size(ws, f"{key}.response_chars"), size(ps, f"{key}.response_chars")
        p(f"| {label} | {'n/a' if wv is None else f'{wv:.0f}'} | {'n/a' if pv is None else f'{pv:.0f}'} | "
          f"{fmt_ratio(ratio(wv, pv))} | | |")
    wv, pv = size(ws, "screenshot.image_bytes"), size(ps, "screenshot.image_bytes")
    if wv is not None or pv is not None:
        p(f"| screenshot PNG bytes (viewport) | {'n/a' if wv is None else f'{wv:.0f}'} | "
          f"{'n/a' if pv is None else f'{pv:.0f}'} | {fmt_ratio(ratio(wv, pv))} | | |")
    wa = size(ws, "screenshot_annotated.image_bytes")
    if wa is not None:
        ok = wa <= 150_000
        if not ok:
            missed.append(f"annotated PNG {wa:.0f} bytes")
        p(f"| annotated screenshot PNG bytes (1280x720, SPA) | {wa:.0f} | — | | <= 150,000 | {verdict(ok)} |")
    wt, pt = wp["startup"].get("tools_chars"), peer["startup"].get("tools_chars")
    ok = None if wt is None else wt <= TOOLS_CHARS_MAX
    if ok is False:
        missed.append(f"tool list {wt} chars")
    p(f"| tool list ({wp['startup'].get('tools', '?')} vs {peer['startup'].get('tools', '?')} tools) | {wt} "
      f"(json.dumps: {wp['startup'].get('tools_chars_json_dumps', '?')}) | {pt} | {fmt_ratio(ratio(wt, pt))} | "
      f"<= {TOOLS_CHARS_MAX:,} chars | {verdict(ok)} |")
    p("")
    p("webpilot sizes are the whole JSON response body (quotes in the element lines are JSON-escaped); "
      "\"list itself\"/\"content\" is the decoded `content` field. The peer's are the MCP text content.")
    p("")

    # -- memory ------------------------------------------------------------------
    p("## Memory")
    p("")
    p("| what | webpilot | peer | ratio | target | status |")
    p("| --- | --- | --- | --- | --- | --- |")
    own = (wp.get("memory_webpilot_own") or {}).get("after_run")
    if own:
        ok = own["rss_mib"] <= OWN_RSS_MAX_MIB
        if not ok:
            missed.append(f"webpilot own RSS {own['rss_mib']} MiB")
        p(f"| webpilot process alone, after the bench | RSS {own['rss_mib']} MiB (PSS {own['pss_mib']}) | — | | "
          f"RSS <= {OWN_RSS_MAX_MIB} MiB | {verdict(ok)} |")
    for when in ("after_warmup", "after_run"):
        wm, pm = wp["memory"].get(when), peer["memory"].get(when)
        if not wm or not pm:
            continue
        r = ratio(wm["pss_mib"], pm["pss_mib"])
        is_target = when == "after_run"
        ok = (r <= 1.0) if (is_target and r is not None) else None
        if ok is False:
            missed.append(f"PSS {wm['pss_mib']} vs {pm['pss_mib']} MiB")
        p(f"| PSS sum {when.replace('_', ' ')} (webpilot+Chromium vs node+Chromium) | {wm['pss_mib']} MiB "
          f"({wm['processes']} procs) | {pm['pss_mib']} MiB ({pm['processes']} procs) | {fmt_ratio(r)} | "
          f"{'<= peer' if is_target else ''} | {verdict(ok) if is_target else ''} |")
        p(f"| RSS sum {when.replace('_', ' ')} | {wm['rss_mib']} MiB | {pm['rss_mib']} MiB | "
          f"{fmt_ratio(ratio(wm['rss_mib'], pm['rss_mib']))} | | |")
    p("")

    # -- notes ---------------------------------------------------------------------
    if na:
        p("## Not measured (webpilot tool missing)")
        p("")
        reasons = {}
        for row, why in na.items():
            reasons.setdefault(why, []).append(row)
        for why, rws in reasons.items():
            p(f"- {', '.join(f'`{x}`' for x in rws)}: {why}")
        p("")
    problems = [("webpilot errors", wp.get("errors", [])), ("peer errors", peer.get("errors", []))]
    warnings = wp.get("driver_warnings", [])
    if any(x for _, x in problems) or warnings:
        p("## Problems seen during the run")
        p("")
        for label, errs in problems:
            for e in errs:
                p(f"- {label}, rep {e['rep']}: {e['error'][:500]}")
        for w in warnings:
            p(f"- webpilot warning: {json.dumps(w)[:700]}")
        p("")
    p("## Targets missed" if missed else "## All targets with data met")
    p("")
    for m in missed:
        p(f"- {m}")
    print("\n".join(out))
    return 1 if (a.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
