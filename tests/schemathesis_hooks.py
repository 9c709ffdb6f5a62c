"""Schemathesis hooks for tests/openapi.rs: keep generated tool calls inside the test's world.

This machine reaches no web, so a generated URL that names some other host can only fail to
load, which webpilot rightly reports as 502 NAVIGATION_FAILED / UPSTREAM; and a generated
`wait_for`/`until` text never appears, which it rightly reports as 504 TIMEOUT after waiting.
Both are covered by their own tests. Here every URL-valued string becomes a page of the fixture
server (WEBPILOT_FIXTURES), waits are bounded, and session names are folded onto a few (random
names would soon reach the session limit, after which every browser call is a 429 that tests
nothing; names the schema refuses stay as they are, so they are still refused). All other
generated values (types, bounds, enums, refs, scripts, names) reach the
service untouched; values of the wrong type are left alone so that negative cases stay negative.
"""

import os
import re
import zlib

import schemathesis

FIXTURES = os.environ["WEBPILOT_FIXTURES"]
PAGES = ["spa.html", "elements.html", "form.html", "article.html", "links.html", "scroll.html"]
URL_FIELDS = ("url", "target")
CONDITION_FIELDS = ("wait_for", "until")
SESSIONS = ["fuzz-a", "fuzz-b", "fuzz-c"]
SESSION_HEADER = "x-webpilot-session"
SESSION_NAME = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
LOWEST_TIMEOUT_MS = 100
SHORTEST_TIMEOUT_MS = 5_000
LONGEST_WAIT_SECONDS = 0.2


def pick(choices: list, value: str) -> str:
    """One of `choices`, chosen by the generated value, so different inputs differ."""
    return choices[zlib.crc32(value.encode()) % len(choices)]


def fixture_page(value: str) -> str:
    return f"{FIXTURES}/{pick(PAGES, value)}"


def localise(arguments: dict) -> None:
    if arguments.get("mode") == "search":
        arguments["mode"] = "url"
    for field in URL_FIELDS:
        if isinstance(arguments.get(field), str):
            arguments[field] = fixture_page(arguments[field])
    if isinstance(arguments.get("urls"), list):
        arguments["urls"] = [fixture_page(u) if isinstance(u, str) else u for u in arguments["urls"]]
    if isinstance(arguments.get("check"), dict):
        localise(arguments["check"])
    if isinstance(arguments.get("session"), str) and SESSION_NAME.fullmatch(arguments["session"]):
        arguments["session"] = pick(SESSIONS, arguments["session"])
    for field in CONDITION_FIELDS:
        if isinstance(arguments.get(field), str):
            del arguments[field]
    timeout = arguments.get("timeout_ms")
    if isinstance(timeout, int) and not isinstance(timeout, bool) and LOWEST_TIMEOUT_MS <= timeout < SHORTEST_TIMEOUT_MS:
        arguments["timeout_ms"] = SHORTEST_TIMEOUT_MS
    seconds = arguments.get("seconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > LONGEST_WAIT_SECONDS:
        arguments["seconds"] = LONGEST_WAIT_SECONDS


@schemathesis.hook
def before_call(context, case, kwargs):
    if isinstance(case.body, dict):
        localise(case.body)
    if case.headers and isinstance(case.headers.get(SESSION_HEADER), str):
        case.headers[SESSION_HEADER] = pick(SESSIONS, case.headers[SESSION_HEADER])
