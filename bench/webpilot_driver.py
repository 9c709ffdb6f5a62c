#!/usr/bin/env python3
"""Benchmark webpilot over its REST API, or over MCP stdio (`--transport mcp`), with the same
fixtures and operations as the peer (Playwright MCP): the operations, fixture server, timing,
memory and report all come from the peer's tool-neutral `bench_common.py`, which is imported from
the shared checkout, not copied.

  /tmp/peer-venv/bin/python bench/webpilot_driver.py -n 10 --bin target/release/webpilot \
      --out /tmp/webpilot-results.json
  /tmp/peer-venv/bin/python bench/webpilot_driver.py -n 10 --transport mcp --out /tmp/webpilot-mcp.json

Over MCP the driver is the peer's own: the official MCP Python SDK's ClientSession on
`webpilot mcp` (stdio), so both servers are timed through the same client.

`WEBPILOT_PEER_DIR` points at the peer bench (default: <repo>/../shared/bench/peer). Needs psutil
(the peer's venv has it, and the MCP SDK). REST is stdlib HTTP (one keep-alive connection, like the
peer's one stdio pipe).

Differences from the peer driver, all recorded in the JSON (`describe`, `not_implemented`):
- click/type are browser_interact action=click/type by the integer ref of the element list
  (type: clear true, no submit); fill_form is one browser_interact type per field (webpilot has no
  multi-field form tool), timed as a whole. Interact waits only while the page is busy, so the login
  click returns with navigated=true once /account is ready.
- screenshot is browser_screenshot with body {} and Accept: image/png (raw PNG body; image bytes
  recorded like the peer's); over MCP, the decoded image content.
- Tools webpilot does not have yet (screenshot while unlisted, cookies) raise
  NotImplementedError; the operation they are part of stops there and its remaining rows are
  reported as n/a instead of failing the repetition.
- `snapshot` is `browser_read mode=elements` (all elements, one budget large enough for the page);
  on the article page it is `mode=markdown` (webpilot reads content as Markdown; its element list
  has no headings or prose, so the article check "A note on sources" could not pass). `--article-mode
  elements` switches that off.
- `wait_text` polls `browser_read mode=text` (no separate wait tool yet), deadline 10 s.
- Extra webpilot-only rows: navigate_spa_ready/webpilot_navigate_only (navigate alone; its result
  must already list "Add Item 50 to cart") and navigate_spa_ready/webpilot_navigate_wait_for
  (navigate with wait_for "Showing 50 of 50 items").
"""
from __future__ import annotations

import asyncio
import base64
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from urllib.parse import urlsplit

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The bench pages are served on 127.0.0.1, which webpilot refuses to open unless allowed.
LOOPBACK_PAGES = ["--fetch-allow", "127.0.0.1"]
PEER_DIR = os.path.abspath(os.environ.get("WEBPILOT_PEER_DIR")
                           or os.path.join(REPO, "..", "shared", "bench", "peer"))
if not os.path.exists(os.path.join(PEER_DIR, "bench_common.py")):
    sys.exit(f"bench_common.py not found in {PEER_DIR}: set WEBPILOT_PEER_DIR")
sys.path.insert(0, PEER_DIR)
import bench_common as bc  # noqa: E402

DEFAULT_BIN = os.path.join(REPO, "target", "release", "webpilot")
WAIT_TEXT_DEADLINE_S = 10.0
WAIT_TEXT_POLL_S = 0.025
SNAPSHOT_MAX_TOKENS = 20_000     # the 200-element page is ~6.5k chars: the whole list fits
ARTICLE_MAX_TOKENS = 50_000      # the 5,000-word article is ~33k chars of Markdown
HTTP_TIMEOUT_S = 60
SURVIVOR_GRACE_S = 2.0

# Rows each bench_common operation records, in order (kept in sync with bench_common.OPERATIONS);
# used to report the rows an operation could not reach as n/a.
OP_ROWS = {
    "op_spa": ["navigate_spa_ready/navigate", "navigate_spa_ready/wait_for", "navigate_spa_ready",
               "snapshot_spa", "click_button", "type_search", "screenshot"],
    "op_static_snapshots": ["navigate_static_elements", "snapshot_elements",
                            "navigate_static_article", "snapshot_article"],
    "op_tabs": ["tab_new", "tab_list"],
    "op_extras_webpilot": ["screenshot_annotated", "ensure_login"],
    "op_login": ["login_flow/navigate", "login_flow/snapshot", "login_flow/fill_form",
                 "login_flow/click_submit", "login_flow/wait_for", "login_flow", "cookies_list"],
}


TRANSPORTS = {"rest": "http (REST, keep-alive)", "mcp": "stdio (MCP, official Python SDK client)"}


class WebpilotError(RuntimeError):
    """A tool call that came back with an error (HTTP 4xx/5xx)."""


# ---------------------------------------------------------------------------
# Process helpers
# ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """Runs in the child before exec: SIGTERM it if this Python process dies (even SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _lingering(process) -> bool:
    import psutil
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _tail(path: str, n: int = 2000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------
class Webpilot:
    name = "webpilot"

    def __init__(self, binary: str, extra_args: list[str], article_mode: str = "markdown",
                 transport: str = "rest"):
        self.binary = os.path.abspath(binary)
        self.transport = transport
        self._stack = AsyncExitStack()
        self.mcp = None
        self.extra_args = extra_args
        self.article_mode = article_mode
        self.startup: dict = {}
        self.warnings: list[dict] = []          # webpilot misbehaviour the run tolerated
        self.own_memory: list[dict] = []        # webpilot's own process, at each process_roots()
        self.rec: bc.Recorder | None = None     # recorder of the running operation (set by the runner wrapper)
        self.page = ""                          # path of the last page navigated to
        self.proc = None
        self.conn = None

    # -- lifecycle ----------------------------------------------------------
    async def __aenter__(self):
        if not os.access(self.binary, os.X_OK):
            raise FileNotFoundError(f"webpilot binary {self.binary} missing or not executable "
                                    "(cargo build --release, or pass --bin / WEBPILOT_BIN)")
        self.workdir = tempfile.mkdtemp(prefix="wpbench-")
        if self.transport == "mcp":
            await self._start_mcp()
            self.version = self._version()
            return self
        self.port = free_port()
        self.argv = [self.binary, "--port", str(self.port), "--data-dir", os.path.join(self.workdir, "data"),
                     *LOOPBACK_PAGES, *self.extra_args, "serve"]
        self.log_path = os.path.join(self.workdir, "webpilot.stderr.log")
        self._log = open(self.log_path, "w")
        t0 = time.perf_counter()
        # cwd = workdir so that a stray ./webpilot.toml is not picked up.
        self.proc = subprocess.Popen(self.argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"webpilot exited with {self.proc.returncode} at start:\n{_tail(self.log_path)}")
            try:
                if self._get("/healthz", timeout=1)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"webpilot not healthy after 30 s:\n{_tail(self.log_path)}")
            await asyncio.sleep(0.02)
        self.startup["session_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        status, body = self._get("/api/tools")
        tools = json.loads(body)
        self.tool_names = [t["function"]["name"] for t in tools]
        self.startup["tools"] = len(self.tool_names)
        self.startup["tools_chars"] = len(body)                       # the JSON text as served
        self.startup["tools_chars_json_dumps"] = len(json.dumps(tools))  # the peer's measure (json.dumps)
        self.version = self._version()
        return self

    async def _start_mcp(self):
        """`webpilot mcp` under the MCP SDK's stdio client, timed like the peer's session start."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        self.argv = [self.binary, "--data-dir", os.path.join(self.workdir, "data"), *LOOPBACK_PAGES,
                     *self.extra_args, "mcp"]
        self.log_path = os.path.join(self.workdir, "webpilot.stderr.log")
        self._log = open(self.log_path, "w")
        params = StdioServerParameters(command=self.binary, args=self.argv[1:], cwd=self.workdir)
        t0 = time.perf_counter()
        r, w = await self._stack.enter_async_context(stdio_client(params, errlog=self._log))
        self.mcp = await self._stack.enter_async_context(ClientSession(r, w))
        await self.mcp.initialize()
        self.startup["session_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        tools = (await self.mcp.list_tools()).tools
        self.tool_names = [t.name for t in tools]
        self.startup["tools"] = len(tools)
        dumped = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
        self.startup["tools_chars"] = self.startup["tools_chars_json_dumps"] = len(dumped)
        self.proc = self._mcp_process()

    def _mcp_process(self):
        """The `webpilot mcp` child of this process (the SDK spawned it)."""
        import psutil
        for p in psutil.Process().children(recursive=True):
            try:
                if p.exe() == os.path.realpath(self.binary):
                    return p
            except psutil.Error:
                continue
        raise RuntimeError(f"no {self.binary} child process found")

    async def _call_mcp(self, tool: str, args: dict) -> tuple[str, dict]:
        result = await self.mcp.call_tool(tool, args)
        texts = [c.text for c in result.content if c.type == "text"]
        self.last_images = [base64.b64decode(c.data) for c in result.content if c.type == "image"]
        text = texts[0] if texts else ""
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        is_error = getattr(result, "is_error", None) or getattr(result, "isError", None)  # mcp 2.x / 1.x
        if is_error or not isinstance(data, dict) or "error" in data:
            raise WebpilotError(f"MCP {tool} {json.dumps(args)} -> {text[:600]}")
        return text, data

    async def screenshot_png(self, args: dict) -> bytes:
        """A screenshot as PNG bytes: over REST the raw body (Accept: image/png), over MCP the
        decoded image content."""
        if self.transport == "mcp":
            await self.call_raw("browser_screenshot", args)
            data = self.last_images[0] if self.last_images else b""
            ctype = "image/png"
        else:
            status, data, ctype = self._request("POST", "/api/tools/browser_screenshot",
                                                json.dumps(args).encode(), accept="image/png", raw=True)
            if status >= 400:
                raise WebpilotError(f"POST /api/tools/browser_screenshot {args} -> HTTP {status}: {data[:300]!r}")
        if not ctype.startswith("image/png") or not data.startswith(b"\x89PNG\r\n\x1a\n"):
            raise WebpilotError(f"browser_screenshot {args}: not a PNG ({ctype}, {data[:40]!r})")
        return data

    async def __aexit__(self, *exc):
        if self.transport == "mcp":
            tree = self._tree_pids()
            t0 = time.perf_counter()
            try:
                await self._stack.aclose()     # closes stdin: webpilot mcp closes Chromium and exits
            finally:
                self.shutdown_ms = round((time.perf_counter() - t0) * 1000, 1)
                if self.shutdown_ms >= 2000:   # the SDK's grace period: it then kills the process group
                    self.warnings.append({"what": f"webpilot mcp took {self.shutdown_ms} ms to exit after stdin closed"})
                self._kill_survivors(tree)
                self._log.close()
                self.shutdown_log = _tail(self.log_path, 4000)
                shutil.rmtree(self.workdir, ignore_errors=True)
            return
        try:
            if self.conn:
                self.conn.close()
            if self.proc and self.proc.poll() is None:
                tree = self._tree_pids()
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(20)   # webpilot closes Chromium on SIGTERM (10 s grace for requests)
                except subprocess.TimeoutExpired:
                    self.warnings.append({"what": "webpilot did not exit within 20 s of SIGTERM; killed"})
                    self.proc.kill()
                    self.proc.wait(5)
                self._kill_survivors(tree)
        finally:
            self._log.close()
            self.shutdown_log = _tail(self.log_path, 4000)
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _tree_pids(self) -> list[int]:
        import psutil
        try:
            return [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _kill_survivors(self, pids: list[int]):
        import psutil
        alive = []
        for pid in pids:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        # Chromium's helpers notice their browser is gone a moment after it exits.
        _, alive = psutil.wait_procs(alive, timeout=SURVIVOR_GRACE_S)
        alive = [p for p in alive if _lingering(p)]
        if alive:
            self.warnings.append({"what": f"{len(alive)} Chromium processes still running {SURVIVOR_GRACE_S} s "
                                          "after webpilot exited; killed",
                                  "pids": [p.pid for p in alive]})
            for p in alive:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass

    def _version(self) -> str:
        try:
            return subprocess.run([self.binary, "--version"], capture_output=True, text=True,
                                  timeout=10, cwd=self.workdir).stdout.strip()
        except Exception as e:  # noqa: BLE001
            return f"unknown ({e})"

    # -- plumbing -------------------------------------------------------------
    def _request(self, method: str, path: str, body: bytes | None = None, timeout: float = HTTP_TIMEOUT_S,
                 accept: str | None = None, raw: bool = False):
        """One request on a keep-alive connection (reconnects once if the server dropped it).
        Returns (status, text), or (status, bytes, content-type) when raw."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if accept:
            headers["Accept"] = accept
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                self.conn.timeout = timeout
                if self.conn.sock:
                    self.conn.sock.settimeout(timeout)
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                if raw:
                    return r.status, data, r.getheader("Content-Type", "")
                return r.status, data.decode("utf-8")
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
            except Exception:
                self.conn.close()
                self.conn = None
                raise

    def _get(self, path: str, timeout: float = HTTP_TIMEOUT_S):
        return self._request("GET", path, timeout=timeout)

    async def call_raw(self, tool: str, args: dict) -> tuple[str, dict]:
        if self.transport == "mcp":
            return await self._call_mcp(tool, args)
        status, text = self._request("POST", f"/api/tools/{tool}", json.dumps(args).encode())
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if status >= 400 or not isinstance(data, dict) or "error" in data:
            raise WebpilotError(f"POST /api/tools/{tool} {json.dumps(args)} -> HTTP {status}: {text[:600]}")
        return text, data

    async def call(self, tool: str, args: dict) -> bc.Resp:
        text, data = await self.call_raw(tool, args)
        self.last = data
        return bc.Resp(text)

    def _size(self, name: str, n: int):
        if self.rec is not None:
            self.rec.add_size(name, n)

    @staticmethod
    def _page_key(path: str) -> str:
        return {"/spa.html": "spa", "/elements.html": "elements", "/article.html": "article",
                "/login": "login_flow"}.get(path, path.strip("/") or "index")

    # -- Driver interface ---------------------------------------------------
    async def navigate(self, url):
        r = await self.call("browser_navigate", {"target": url})
        self.page = urlsplit(self.last.get("url") or url).path
        return r

    async def wait_text(self, text):
        """Polls the page text until `text` appears (webpilot has no wait tool of its own yet)."""
        deadline = time.monotonic() + WAIT_TEXT_DEADLINE_S
        polls = 0
        while True:
            polls += 1
            body, data = await self.call_raw("browser_read", {"mode": "text", "max_tokens": SNAPSHOT_MAX_TOKENS})
            if text in data.get("content", ""):
                self._size("wait_text.polls", polls)
                return bc.Resp(body)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in the page text after {WAIT_TEXT_DEADLINE_S:.0f} s "
                                   f"({polls} browser_read mode=text polls); last text: {data.get('content', '')[:300]!r}")
            await asyncio.sleep(WAIT_TEXT_POLL_S)

    async def snapshot(self):
        key = self._page_key(self.page)
        if key == "article" and self.article_mode == "markdown":
            args = {"mode": "markdown", "max_tokens": ARTICLE_MAX_TOKENS}
        else:
            args = {"mode": "elements", "max_tokens": SNAPSHOT_MAX_TOKENS}
        body, data = await self.call_raw("browser_read", args)
        if data.get("truncated"):
            raise AssertionError(f"browser_read {args} truncated on {self.page} "
                                 f"(total {data.get('total')}, next_cursor {data.get('next_cursor')})")
        content = data.get("content", "")
        self._size(f"snapshot_{key}.content_chars", len(content))
        if args["mode"] == "elements":
            listed = sum(1 for line in content.splitlines() if re.match(r"\[\d+\] ", line))
            self._size(f"snapshot_{key}.elements_listed", listed)
            if data.get("total") is not None:
                self._size(f"snapshot_{key}.elements_total", data["total"])
                if listed != data["total"]:
                    self._warn_once(f"snapshot {key}: {listed} element lines listed but total={data['total']}",
                                    args, body)
        return bc.Resp(body)

    def ref(self, snapshot, role, name):
        try:
            content = json.loads(snapshot).get("content", snapshot)
        except ValueError:
            content = snapshot
        pat = re.compile(r"^\[(\d+)\] " + re.escape(role) + r' "' + re.escape(name) + r'"(?=\s|$)', re.M)
        m = pat.search(content)
        if not m:
            raise LookupError(f'no {role} "{name}" in element list ({len(content)} chars)')
        return m.group(1)

    def _missing(self, what: str, tool: str):
        have = tool in getattr(self, "tool_names", [])
        detail = (f"{tool} exists now but this driver does not drive it yet: update bench/webpilot_driver.py"
                  if have else f"webpilot has no {tool} tool yet")
        raise NotImplementedError(f"{what}: {detail}")

    async def _interact(self, args: dict) -> tuple[str, dict]:
        """browser_interact; follows a navigation it reports (for the snapshot's page key)."""
        body, data = await self.call_raw("browser_interact", args)
        self.last = data
        if data.get("navigated") and data.get("url"):
            self.page = urlsplit(data["url"]).path
        ready = data.get("ready") or {}
        if isinstance(ready, str):  # an action's short verdict: "quiet 12 ms"
            words = ready.split()
            ready = {"by": words[0], "after_ms": float(words[1])} if len(words) == 3 else {}
        if isinstance(ready.get("after_ms"), (int, float)):
            self._size(f"interact_{args['action']}.ready_after_ms", ready["after_ms"])
        return body, data

    @staticmethod
    def _ref_int(ref) -> int:
        return int(ref)

    async def click(self, ref, description):
        if "browser_interact" not in self.tool_names:
            self._missing("click", "browser_interact")
        body, _ = await self._interact({"action": "click", "ref": self._ref_int(ref)})
        return bc.Resp(body)

    async def type(self, ref, text, description):
        if "browser_interact" not in self.tool_names:
            self._missing("type", "browser_interact")
        body, _ = await self._interact({"action": "type", "ref": self._ref_int(ref), "text": text, "clear": True})
        return bc.Resp(body)

    async def fill_form(self, fields):
        """One browser_interact type per field (webpilot has no multi-field form tool); the
        response is the concatenation of the per-field results."""
        if "browser_interact" not in self.tool_names:
            self._missing("fill_form", "browser_interact")
        bodies = []
        for f in fields:
            body, _ = await self._interact({"action": "type", "ref": self._ref_int(f["ref"]), "text": f["value"],
                                      "clear": True})
            bodies.append(body)
        return bc.Resp("\n".join(bodies))

    async def screenshot(self):
        if "browser_screenshot" not in self.tool_names:
            self._missing("screenshot", "browser_screenshot")
        return bc.Resp("", len(await self.screenshot_png({})))

    async def cookies(self):
        if "browser_cookies" not in self.tool_names:
            self._missing("cookies", "browser_cookies")
        return await self.call("browser_cookies", {"action": "list"})

    async def tab_new(self, url):
        return await self.call("browser_tabs", {"action": "new", "url": url})

    async def tab_list(self):
        return await self.call("browser_tabs", {"action": "list"})

    async def tab_close(self, index):
        """Closes the tab at the peer-style index (0-based position in the tab list)."""
        _, data = await self.call_raw("browser_tabs", {"action": "list"})
        tabs = data["tabs"]
        if not 0 <= index < len(tabs):
            raise IndexError(f"no tab at index {index}: {[t['tab'] for t in tabs]}")
        tab_id = tabs[index]["tab"]
        args = {"action": "close", "tab": tab_id}
        try:
            body, _ = await self.call_raw("browser_tabs", args)
            return bc.Resp(body)
        except WebpilotError as e:
            # The close may have happened anyway; keep the run going if it did, but record it.
            _, after = await self.call_raw("browser_tabs", {"action": "list"})
            if any(t["tab"] == tab_id for t in after["tabs"]):
                raise
            self.warnings.append({"what": f"browser_tabs close failed although {tab_id} was closed",
                                  "error": str(e), "tabs_after": [t["tab"] for t in after["tabs"]]})
            return bc.Resp(json.dumps(after))

    def process_roots(self):
        import psutil
        roots = [self.proc.pid]     # Chromium is webpilot's child, so its tree counts either way
        if self.transport == "rest":
            try:
                _, body = self._get("/healthz")
                browser = json.loads(body).get("browser") or {}
                if browser.get("pid"):
                    roots.append(int(browser["pid"]))
            except (OSError, ValueError) as e:
                self.warnings.append({"what": f"GET /healthz failed: {e}"})
        try:
            mi = psutil.Process(self.proc.pid).memory_full_info()
            self.own_memory.append({"rss_mib": round(mi.rss / 2**20, 1),
                                    "pss_mib": round(getattr(mi, "pss", mi.rss) / 2**20, 1),
                                    "uss_mib": round(getattr(mi, "uss", mi.rss) / 2**20, 1)})
        except psutil.Error:
            pass
        return roots

    def describe(self):
        return {"name": self.name, "version": self.version, "transport": TRANSPORTS[self.transport],
                "argv": self.argv, "binary": self.binary, "tools": self.tool_names,
                "snapshot": {"default": f"browser_read mode=elements max_tokens={SNAPSHOT_MAX_TOKENS}",
                             "article": (f"browser_read mode=markdown max_tokens={ARTICLE_MAX_TOKENS}"
                                         if self.article_mode == "markdown" else "as default")},
                "wait_text": f"poll browser_read mode=text every {WAIT_TEXT_POLL_S * 1000:.0f} ms, "
                             f"deadline {WAIT_TEXT_DEADLINE_S:.0f} s"}

    def _warn_once(self, what, args, body):
        if not any(w["what"] == what for w in self.warnings):
            self.warnings.append({"what": what, "request": args, "response": body[:600]})


# ---------------------------------------------------------------------------
# Webpilot-only operation: the SPA is ready when navigate returns
# ---------------------------------------------------------------------------
async def op_spa_webpilot(d: Webpilot, base: str, rec: bc.Recorder):
    await d.call("browser_navigate", {"target": f"{base}/index.html", "max_tokens": 0})      # reset, untimed
    r = await rec.timed("navigate_spa_ready/webpilot_navigate_only", d.navigate(f"{base}/spa.html"))
    bc.expect("Add Item 50 to cart" in r.text,
              f"navigate result lacks 'Add Item 50 to cart' (ready={d.last.get('ready')}, "
              f"elements_total={d.last.get('elements_total')}, elements_next_cursor={d.last.get('elements_next_cursor')})")
    rec.add_size("navigate_spa_ready/webpilot_navigate_only.ready_after_ms", (d.last.get("ready") or {}).get("after_ms", -1))

    await d.call("browser_navigate", {"target": f"{base}/index.html", "max_tokens": 0})      # reset, untimed
    r = await rec.timed("navigate_spa_ready/webpilot_navigate_wait_for",
                        d.call("browser_navigate", {"target": f"{base}/spa.html", "wait_for": bc.SPA_READY}))
    d.page = "/spa.html"
    bc.expect("Add Item 50 to cart" in r.text, "navigate+wait_for result lacks 'Add Item 50 to cart'")
    ready = d.last.get("ready") or {}
    bc.expect(ready.get("by") == "wait_for" and not ready.get("missing"),
              f"navigate wait_for not satisfied: ready={ready}")


async def op_extras_webpilot(d: Webpilot, base: str, rec: bc.Recorder):
    """Annotated screenshot of the SPA, and ensure_login with a saved profile (after op_login)."""
    await d.call("browser_navigate", {"target": f"{base}/spa.html", "max_tokens": 0})        # untimed
    if "browser_screenshot" not in d.tool_names:
        d._missing("screenshot_annotated", "browser_screenshot")
    t0 = time.perf_counter()
    data = await d.screenshot_png({"annotate": True})
    rec.add_time("screenshot_annotated", (time.perf_counter() - t0) * 1000)
    rec.add_size("screenshot_annotated.image_bytes", len(data))

    if "browser_cookies" not in d.tool_names:
        d._missing("ensure_login", "browser_cookies")
    await d.call_raw("browser_cookies", {"action": "export", "name": "bench"})                   # untimed
    await d.call_raw("browser_cookies", {"action": "clear", "session": "ensure"})                # untimed
    check = {"url": f"{base}/account", "text": bc.LOGIN_DONE}
    t0 = time.perf_counter()
    _, result = await d.call_raw("browser_cookies", {"action": "ensure_login", "name": "bench", "check": check,
                                                "session": "ensure"})
    rec.add_time("ensure_login", (time.perf_counter() - t0) * 1000)
    bc.expect(result.get("logged_in") is True, f"ensure_login did not log in: {result}")


# ---------------------------------------------------------------------------
# Runner glue: skip (report as n/a) what raises NotImplementedError
# ---------------------------------------------------------------------------
NOT_IMPLEMENTED: dict[str, str] = {}   # row -> reason


def tolerant(op):
    rows = OP_ROWS.get(op.__name__, [])

    async def run(d: Webpilot, base: str, rec: bc.Recorder):
        d.rec = rec
        before = {k: len(v) for k, v in rec.times.items()}
        try:
            await op(d, base, rec)
        except NotImplementedError as e:
            reached = {k for k, v in rec.times.items() if len(v) > before.get(k, 0)}
            for row in rows:
                if row not in reached:
                    NOT_IMPLEMENTED.setdefault(row, str(e))
        finally:
            d.rec = None
    run.__name__ = op.__name__
    return run


def patched_operations() -> list:
    ops = []
    for op in bc.OPERATIONS:
        ops.append(tolerant(op))
        if op.__name__ == "op_spa":
            ops.append(tolerant(op_spa_webpilot))
        if op.__name__ == "op_login":
            ops.append(tolerant(op_extras_webpilot))
    return ops


def main():
    ap = bc.common_args(__doc__)
    ap.add_argument("--bin", default=os.environ.get("WEBPILOT_BIN", DEFAULT_BIN),
                    help="webpilot binary (default: $WEBPILOT_BIN or target/release/webpilot)")
    ap.add_argument("--wp-arg", action="append", default=[], metavar="ARG",
                    help="extra webpilot flag, repeatable, e.g. --wp-arg=--viewport=1280x720")
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="rest",
                    help="REST over HTTP (default) or MCP over stdio")
    ap.add_argument("--article-mode", choices=["markdown", "elements"], default="markdown",
                    help="browser_read mode for the article snapshot (default markdown)")
    a = ap.parse_args()

    # A TERM (e.g. from `timeout`) must still run the cleanup that stops webpilot and Chromium.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    if a.wait_idle:
        bc.wait_idle(a.wait_idle)
    bc.OPERATIONS = patched_operations()
    driver = Webpilot(a.bin, a.wp_arg, a.article_mode, a.transport)
    res = asyncio.run(bc.run_benchmark(driver, a.reps, a.warmup, a.port))

    res["startup"].update({k: v for k, v in driver.startup.items() if k not in res["startup"]})
    own = driver.own_memory
    if own:
        res["memory_webpilot_own"] = {"after_warmup": own[0], "after_run": own[-1]}
    res["not_implemented"] = dict(NOT_IMPLEMENTED)
    res["driver_warnings"] = driver.warnings
    res["webpilot_log_tail"] = driver.shutdown_log[-2000:]

    rc = bc.finish(res, a.out)
    if own:
        print(f"webpilot own process after run: RSS {own[-1]['rss_mib']} MiB, PSS {own[-1]['pss_mib']} MiB")
    if NOT_IMPLEMENTED:
        print(f"\nn/a (not implemented in webpilot yet): {', '.join(NOT_IMPLEMENTED)}")
    if driver.warnings:
        print(f"\nWEBPILOT WARNINGS ({len(driver.warnings)}):")
        for w in driver.warnings:
            print(" ", json.dumps(w)[:800])
    sys.exit(rc)


if __name__ == "__main__":
    main()
