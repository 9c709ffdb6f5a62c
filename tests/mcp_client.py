"""Drives webpilot over MCP with the official Python SDK (`mcp`), as an agent client would.

  python tests/mcp_client.py stdio /path/to/webpilot SPA_URL
  python tests/mcp_client.py http http://127.0.0.1:PORT/mcp SPA_URL

Prints one JSON object with what it saw; tests/mcp.rs asserts on it.
"""
import asyncio
import base64
import json
import os
import re
import sys
import time

import jsonschema

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


class Checked:
    """Calls tools and checks each success's structuredContent: present, equal to the text
    content, valid against the outputSchema that tools/list published. (The SDK validates it
    too; this makes the check explicit and reports it.)"""

    def __init__(self, session, schemas):
        self.session = session
        self.schemas = schemas
        self.structured = []

    async def call_tool(self, name, arguments, **options):
        result = await self.session.call_tool(name, arguments, **options)
        if not result.isError:
            structured = result.structuredContent
            problems = []
            if structured is None:
                problems.append("no structuredContent")
            else:
                if structured != json.loads(text_of(result)):
                    problems.append("structuredContent differs from the text content")
                validator = jsonschema.Draft202012Validator(self.schemas[name])
                problems.extend(e.message for e in validator.iter_errors(structured))
            self.structured.append({"tool": name, "problems": problems})
        return result


async def paging(session):
    """Two slices of the element list under a small budget: the second starts where the first ended."""
    first = json.loads(text_of(await session.call_tool("browser_read", {"mode": "elements", "max_tokens": 60})))
    cursor = first.get("next_cursor")
    second = json.loads(text_of(await session.call_tool(
        "browser_read", {"mode": "elements", "max_tokens": 60, "cursor": cursor})))

    def refs(slice_):
        return [int(m) for m in re.findall(r"^\[(\d+)\]", slice_["content"], re.M)]

    return {"truncated": first.get("truncated"), "cursor": cursor, "first": refs(first), "second": refs(second)}


LOG = []


async def on_log(params):
    LOG.append({"level": params.level, "data": params.data})


async def prompts_and_logging(session, spa_url):
    """Prompts listed and rendered; log lines at and above the level set, and none below."""
    report = {}
    listed = await session.list_prompts()
    report["prompts"] = [p.name for p in listed.prompts]
    rendered = await session.get_prompt("check_page_errors", {"url": spa_url})
    report["prompt_text"] = "".join(m.content.text for m in rendered.messages)
    try:
        await session.get_prompt("log_in_once", {"url": spa_url})
        report["prompt_missing_argument"] = "accepted"
    except Exception as error:  # the SDK raises McpError for a JSON-RPC error
        report["prompt_missing_argument"] = str(error)
    # Over streamable HTTP log lines ride the session's own stream, not the call's: wait for
    # them. That stream keeps their order, so a line the filter should have held back would
    # arrive before the last line awaited.
    await session.set_logging_level("info")
    LOG.clear()
    await session.call_tool("browser_navigate", {"target": spa_url})
    await log_lines(lambda: any(line["data"].get("event") == "done" for line in LOG))
    report["log_at_info"] = list(LOG)
    await session.set_logging_level("error")
    LOG.clear()
    await session.call_tool("browser_read", {"mode": "sideways"})
    await session.call_tool("browser_tabs", {"action": "list"})
    await session.call_tool("browser_read", {"mode": "upside-down"})
    await log_lines(lambda: len(LOG) >= 2)
    report["log_at_error"] = list(LOG)
    report.update(await completions(session))
    return report


async def completions(session):
    """completion/complete: the tenant's saved profiles for a prompt's `profile`, the sessions
    this connection used for a resource template's `session`, nothing for free text."""
    exported = await session.call_tool(
        "browser_cookies", {"action": "export", "name": "shop-login"}
    )
    report = {"profile_exported": not exported.isError}
    log_in = types.PromptReference(type="ref/prompt", name="log_in_once")
    trace = types.ResourceTemplateReference(type="ref/resource", uri="webpilot://traces/{session}")
    read_app = types.PromptReference(type="ref/prompt", name="read_javascript_app")
    asked = {
        "complete_profile": (log_in, {"name": "profile", "value": "shop"}),
        "complete_profile_unknown": (log_in, {"name": "profile", "value": "zzz"}),
        "complete_session": (trace, {"name": "session", "value": ""}),
        "complete_session_typed": (trace, {"name": "session", "value": "sha"}),
        "complete_url": (read_app, {"name": "url", "value": "http"}),
    }
    for key, (ref, argument) in asked.items():
        answer = await session.complete(ref, argument)
        report[key] = answer.completion.values
    return report


async def log_lines(enough):
    with anyio.move_on_after(10):
        while not enough():
            await anyio.sleep(0.01)


async def cancelled_navigation(session, spa_url):
    """A navigation to a page that never answers, cancelled by the client. The protocol has no
    answer to a cancelled request, so the call's end shows in its log line (the level is still
    `error`): how long after the notification it came, and whether the session's next call ran
    at once (a call still waiting for the page would hold the session for its 30 s)."""
    origin = spa_url.rsplit("/", 1)[0]
    request_id = session._request_id
    LOG.clear()
    async with anyio.create_task_group() as group:
        group.start_soon(session.call_tool, "browser_navigate",
                         {"target": f"{origin}/hang", "timeout_ms": 30000})
        await anyio.sleep(0.5)
        cancelled_at = time.monotonic()
        await session.send_notification(types.ClientNotification(types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason="changed my mind"))))
        with anyio.move_on_after(20):
            while not LOG:
                await anyio.sleep(0.01)
        ended_after_ms = round((time.monotonic() - cancelled_at) * 1000) if LOG else None
        # No answer comes for a cancelled request: stop waiting for one.
        group.cancel_scope.cancel()
    started = time.monotonic()
    after = await session.call_tool("browser_navigate", {"target": spa_url})
    return {"ended_after_ms": ended_after_ms, "log": list(LOG),
            "next_call_ms": round((time.monotonic() - started) * 1000),
            "next_call_error": after.isError, "next_title": json.loads(text_of(after)).get("title")}


RESOURCE_UPDATES = []


async def on_message(message):
    """Server notifications the session does not handle itself: resource updates are kept."""
    if isinstance(message, types.ServerNotification) and \
            isinstance(message.root, types.ResourceUpdatedNotification):
        RESOURCE_UPDATES.append(str(message.root.params.uri))


async def resources(session, spa_url):
    """A download and a saved screenshot come back as resource links, are listed, and read
    byte for byte; a crawl task is a resource that sends updates to a subscriber."""
    import hashlib
    report = {}
    origin = spa_url.rsplit("/", 1)[0]
    saved = await session.call_tool("browser_interact", {
        "action": "download", "url": f"{origin}/bytes/70000", "filename": "pattern.bin"})
    download = json.loads(text_of(saved))["download"]
    links = [c for c in saved.content if c.type == "resource_link"]
    report["download_link"] = str(links[0].uri) if links else None
    report["download_link_mime"] = links[0].mimeType if links else None
    if links:
        read = await session.read_resource(links[0].uri)
        blob = base64.b64decode(read.contents[0].blob)
        report["download_sha_matches"] = hashlib.sha256(blob).hexdigest() == download["sha256"]
    shot = await session.call_tool("browser_screenshot", {"save": "mcp-shot", "format": "png"})
    shot_links = [str(c.uri) for c in shot.content if c.type == "resource_link"]
    report["screenshot_link"] = shot_links[0] if shot_links else None
    listed = await session.list_resources()
    report["listed"] = [str(r.uri) for r in listed.resources]
    templates = await session.list_resource_templates()
    report["templates"] = sorted(t.uriTemplate for t in templates.resourceTemplates)
    try:
        await session.read_resource("webpilot://downloads/someone-else/pattern.bin")
        report["missing_read"] = "read"
    except Exception as error:  # the SDK raises McpError for an error response
        report["missing_read"] = str(error)
    urls = [f"{origin}/crawl/page/{n}" for n in range(3)] + [f"{origin}/crawl/slow"]
    crawl = await session.call_tool("crawl_batch", {"urls": urls, "mode": "http", "max_tokens": 50,
                                                    "parallel": 1})
    task = json.loads(text_of(crawl))["task_id"]
    uri = f"webpilot://crawls/{task}"
    await session.subscribe_resource(uri)
    await session.call_tool("crawl_status", {"task_id": task, "wait": 60})
    report["crawl_updates"] = RESOURCE_UPDATES.count(uri)
    crawl_read = await session.read_resource(uri)
    report["crawl_resource"] = json.loads(crawl_read.contents[0].text)
    return report


async def crawl_tasks(session, spa_url):
    """crawl_batch as a task (the 2025-11-25 tasks): created, polled to its end, its result
    fetched and listed; a second task, of slow pages read one at a time, cancelled while it
    runs. Another connection's task is not among the listed unless it is the same tenant's."""
    report = {}
    origin = spa_url.rsplit("/", 1)[0]
    urls = [f"{origin}/crawl/page/{n}" for n in range(3)]
    created = await session.experimental.call_tool_as_task(
        "crawl_batch", {"urls": urls, "mode": "http", "max_tokens": 50}, ttl=600000)
    task_id = created.task.taskId
    report["created"] = created.task.model_dump(mode="json", exclude_none=True)
    report["polled"] = [status.status async for status in session.experimental.poll_task(task_id)]
    result = await session.experimental.get_task_result(task_id, types.CallToolResult)
    report["result_error"] = result.isError
    report["result"] = result.structuredContent
    report["result_meta"] = result.meta
    report["listed"] = [t.taskId for t in (await session.experimental.list_tasks()).tasks]
    token = f"cancel-{os.getpid()}-{int(time.monotonic() * 1000)}"
    slow = [f"{origin}/crawl/slow/{token}-{n}" for n in range(6)]
    second = await session.experimental.call_tool_as_task(
        "crawl_batch", {"urls": slow, "mode": "http", "max_tokens": 50, "parallel": 1})
    slow_id = second.task.taskId
    report["slow_token"] = token
    report["slow_status"] = (await session.experimental.get_task(slow_id)).status
    started = time.monotonic()
    cancelled = await session.experimental.cancel_task(slow_id)
    report["cancelled"] = cancelled.status
    report["cancel_ms"] = int((time.monotonic() - started) * 1000)
    report["after_cancel"] = (await session.experimental.get_task(slow_id)).status
    try:
        await session.experimental.cancel_task(slow_id)
        report["cancel_again"] = "accepted"
    except Exception as error:
        report["cancel_again"] = str(error)
    try:
        await session.experimental.get_task("no-such-task")
        report["unknown_task"] = "found"
    except Exception as error:
        report["unknown_task"] = str(error)
    try:
        await session.experimental.call_tool_as_task("browser_tabs", {"action": "list"})
        report["not_a_task_tool"] = "accepted"
    except Exception as error:
        report["not_a_task_tool"] = str(error)
    slow_status = await session.call_tool("crawl_status", {"task_id": slow_id})
    report["slow_report"] = json.loads(text_of(slow_status))
    return report


async def person_presses_done(session, url, report):
    """The person: a second browser session opens the live-view link and presses Done."""
    try:
        report["person"] = await press_done(session, url)
    except Exception as error:
        report["person_error"] = repr(error)


async def press_done(session, url):
    viewer = f"person-{os.getpid()}"
    opened = await session.call_tool("browser_navigate", {"session": viewer, "target": url})
    if opened.isError:
        return text_of(opened)
    # The person reads what is asked before pressing Done.
    await session.call_tool("browser_interact", {"session": viewer, "action": "wait",
                                                 "until": "Sign in for me", "timeout_ms": 20000})
    line, clicked = await click_button(session, viewer, '"Done"', "Done")
    if clicked is None:
        return line
    return text_of(clicked) if clicked.isError else "pressed"


async def click_button(session, viewer, needle, text):
    """Clicks the first element of `viewer`'s page whose line holds `needle`, waiting for
    `text` to show between reads: (its line, the click's result), or (the last element list,
    None) when it never showed."""
    lines = []
    for _ in range(100):
        read = await session.call_tool("browser_read", {"session": viewer, "mode": "elements"})
        lines = json.loads(text_of(read))["content"].splitlines()
        found = [line for line in lines if needle in line]
        if found:
            ref = int(re.match(r"\[(\d+)\]", found[0]).group(1))
            clicked = await session.call_tool("browser_interact", {"session": viewer, "action": "click", "ref": ref})
            return found[0], clicked
        await session.call_tool("browser_interact", {"session": viewer, "action": "wait", "until": text,
                                                     "timeout_ms": 2000})
    return lines, None


async def link_opening_client(target, person, calls):
    """A client that opens links (URL elicitation): each elicitation is recorded and answered
    "accept" then "decline"; on accept `person(session, url, report)` runs beside the waiting
    call; completions are recorded. `calls(session, report, person_done)` makes the calls."""
    report = {"elicited": [], "completed": []}
    answers = ["accept", "decline"]
    holder = {}

    async def on_elicit(context, params):
        report["elicited"].append({"mode": params.mode, "url": params.url,
                                   "message": params.message, "id": params.elicitationId})
        action = answers.pop(0)
        if action == "accept":
            # Kept, so that the task is not collected before it runs.
            holder["person"] = asyncio.get_running_loop().create_task(
                person(holder["session"], params.url, report))
        return types.ElicitResult(action=action)

    async def on_complete(message):
        if isinstance(message, types.ServerNotification) and \
                isinstance(message.root, types.ElicitCompleteNotification):
            report["completed"].append(message.root.params.elicitationId)

    async def person_done():
        await holder["person"]

    async with streamablehttp_client(target) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=on_elicit,
                                 message_handler=on_complete) as session:
            holder["session"] = session
            await session.initialize()
            await calls(session, report, person_done)
    return report


async def url_elicitation(target, spa_url):
    """A client that opens links: a hand-off's live view arrives as a URL elicitation, the person
    it opens the link for presses Done, and the completion names the same elicitation; a user who
    declines ends the next hand-off at once."""
    async def calls(session, report, person_done):
        await session.call_tool("browser_navigate", {"target": spa_url})
        done = await session.call_tool("browser_interact", {
            "action": "handoff", "message": "Sign in for me", "timeout_ms": 60000})
        report["accepted"] = json.loads(text_of(done))
        await person_done()
        started = time.monotonic()
        declined = await session.call_tool("browser_interact", {
            "action": "handoff", "message": "Approve again", "timeout_ms": 60000})
        report["declined"] = json.loads(text_of(declined))
        report["declined_ms"] = int((time.monotonic() - started) * 1000)
    return await link_opening_client(target, person_presses_done, calls)


async def person_allows(session, url, report):
    """The person: a second browser session opens the question's link and presses Allow."""
    try:
        viewer = f"allower-{os.getpid()}"
        opened = await session.call_tool("browser_navigate", {"session": viewer, "target": url})
        report["person_opened"] = not opened.isError
        line, clicked = await click_button(session, viewer, 'button "Allow', "Allow")
        if clicked is not None:
            report["person_allowed"] = line
    except Exception as error:
        report["person_error"] = repr(error)


async def confirmation_elicitation(target, spa_url):
    """A download the operator holds for a person, asked of a client that opens links: the
    question's link arrives as a URL elicitation, the person it opens the link for allows it,
    the call goes on and the completion names the same elicitation; a user who declines ends
    the next call's wait at once with the question still open."""
    origin = spa_url.rsplit("/", 1)[0]

    async def calls(session, report, person_done):
        await session.call_tool("browser_navigate", {"target": spa_url})
        # No timeout_ms: a call that asks a person gets a hand-off's time.
        allowed = await session.call_tool("browser_interact", {
            "action": "download", "url": f"{origin}/bytes/1234"})
        report["allowed_error"] = allowed.isError
        report["allowed"] = json.loads(text_of(allowed))
        await person_done()
        started = time.monotonic()
        declined = await session.call_tool("browser_interact", {
            "action": "download", "url": f"{origin}/bytes/4321", "timeout_ms": 60000})
        report["declined_error"] = declined.isError
        report["declined"] = json.loads(text_of(declined))
        report["declined_ms"] = int((time.monotonic() - started) * 1000)
    return await link_opening_client(target, person_allows, calls)


async def scenario(session, spa_url):
    report = {}
    init = await session.initialize()
    report["server"] = init.serverInfo.name
    tasks = init.capabilities.tasks
    report["tasks_capability"] = tasks.model_dump(mode="json", exclude_none=True) if tasks else None
    tools = await session.list_tools()
    report["tools"] = {t.name: {"description": t.description, "parameters": t.inputSchema,
                                "output_schema": t.outputSchema, "title": t.title,
                                "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                                if t.annotations else None,
                                "execution": t.execution.model_dump(mode="json", exclude_none=True)
                                if t.execution else None} for t in tools.tools}
    session = Checked(session, {t.name: t.outputSchema for t in tools.tools})
    nav = await session.call_tool("browser_navigate", {"target": spa_url})
    report["navigate_error"] = nav.isError
    report["navigate"] = json.loads(text_of(nav))
    read = await session.call_tool("browser_read", {"mode": "elements", "max_tokens": 100000})
    lines = json.loads(text_of(read))["content"].splitlines()
    add = next(line for line in lines if "Add Item 07 to cart" in line)
    ref = int(re.match(r"\[(\d+)\]", add).group(1))
    report["paging"] = await paging(session)
    click = await session.call_tool("browser_interact", {"action": "click", "ref": ref})
    report["click_error"] = click.isError
    text = await session.call_tool("browser_read", {"mode": "text", "max_tokens": 100000})
    report["cart_after_click"] = "Cart: 1 item" in json.loads(text_of(text))["content"]
    shot = await session.call_tool("browser_screenshot", {"annotate": True})
    images = [c for c in shot.content if c.type == "image"]
    report["image_mime"] = images[0].mimeType if images else None
    report["image_is_png"] = bool(images) and base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
    report["screenshot_text"] = json.loads(text_of(shot))
    bad = await session.call_tool("browser_read", {"mode": "sideways"})
    report["bad_error"] = bad.isError
    report["bad"] = json.loads(text_of(bad))
    again = await session.call_tool("browser_tabs", {"action": "list"})
    report["after_bad_error"] = again.isError
    report["session"] = json.loads(text_of(again)).get("session")
    shared = await session.call_tool("browser_tabs", {"action": "list", "session": "shared-on-purpose"})
    report["explicit_session"] = json.loads(text_of(shared)).get("session")
    # The tools without a browser session too: their structured content is checked the same way.
    await session.call_tool("browser_cookies", {"action": "list"})
    await session.call_tool("open_web_page", {"url": spa_url, "max_tokens": 200})
    # A crawl awaited in one call: its progress arrives as notifications while it runs.
    # Five quick pages, then one that answers after two seconds: the task is still running
    # when the wait starts.
    origin = spa_url.rsplit("/", 1)[0]
    urls = [f"{origin}/crawl/page/{n}" for n in range(5)] + [f"{origin}/crawl/slow"]
    crawl = await session.call_tool("crawl_batch", {"urls": urls, "mode": "http", "max_tokens": 50,
                                                    "parallel": 1})
    task = json.loads(text_of(crawl))["task_id"]
    crawl_progress = []

    async def on_crawl_progress(value, total, message):
        crawl_progress.append({"progress": value, "total": total, "message": message})

    status = await session.call_tool("crawl_status", {"task_id": task, "wait": 60},
                                     progress_callback=on_crawl_progress)
    report["crawl_waited"] = json.loads(text_of(status))
    report["crawl_progress"] = crawl_progress
    # A hand-off nobody answers: progress (with the live link) while it waits, then its result.
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "message": message})

    handoff = await session.call_tool(
        "browser_interact", {"action": "handoff", "message": "Approve the login", "timeout_ms": 5600},
        progress_callback=on_progress)
    report["handoff"] = json.loads(text_of(handoff))
    report["handoff_progress"] = progress
    report["structured"] = session.structured
    report.update(await prompts_and_logging(session.session, spa_url))
    report["cancelled"] = await cancelled_navigation(session.session, spa_url)
    report["resources"] = await resources(session.session, spa_url)
    report["tasks"] = await crawl_tasks(session.session, spa_url)
    return report


async def main():
    transport, target, spa_url = sys.argv[1], sys.argv[2], sys.argv[3]
    if transport == "confirm-http":
        print(json.dumps(await confirmation_elicitation(target, spa_url)))
        return
    if transport == "stdio":
        params = StdioServerParameters(command=target, args=["mcp"], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, logging_callback=on_log,
                                     message_handler=on_message) as session:
                report = await scenario(session, spa_url)
    else:
        async with streamablehttp_client(target) as (read, write, _):
            async with ClientSession(read, write, logging_callback=on_log,
                                     message_handler=on_message) as session:
                report = await scenario(session, spa_url)
        report["url_elicitation"] = await url_elicitation(target, spa_url)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
