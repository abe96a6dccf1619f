"""An MCP client (the official Python SDK) that drives baton the way a coding agent would.

    mcp_client.py stdio BATON_BINARY WORKSPACE
    mcp_client.py http URL TOKEN

It lists the tools, creates and starts a task on the `fast` pipeline (a script step, then a
gate), waits for it at the gate through resource-updated notifications (no polling), approves
it, checks it is done, and reads its step's log. On stdio it then does the same wait with the
2026-07-28 protocol's `subscriptions/listen`. Any failed check exits non-zero with a line
saying which; the last line printed on success is `ok`.
"""

import json
import sys

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.client import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

EXPECTED_TOOLS = {
    "list_tasks", "show_task", "create_task", "start", "approve", "reject", "move", "abort",
    "resume", "retry", "task_logs", "task_diff", "list_pipelines", "show_pipeline",
    "validate_pipeline", "list_agents",
}


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def result_json(res):
    check(not res.is_error, f"tool error: {res.content}")
    return json.loads(res.content[0].text)


async def scenario(read, write):
    updates = anyio.create_memory_object_stream(100)
    send, receive = updates

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            await send.send(message.params.uri)

    async with ClientSession(read, write, message_handler=on_message) as s:
        await s.initialize()
        tools = {t.name for t in (await s.list_tools()).tools}
        check(EXPECTED_TOOLS <= tools, f"tools missing: {EXPECTED_TOOLS - tools}")
        print(f"tools: {len(tools)}", flush=True)

        # A bad request is an error result with the CLI's sentence, and the server goes on.
        bad = await s.call_tool("show_task", {"id": 4242})
        check(bad.is_error, "show_task of a missing task is an error")
        check("does not exist" in bad.content[0].text, f"error sentence: {bad.content}")

        board = await s.read_resource("baton://board")
        check(isinstance(json.loads(board.contents[0].text), list), "the board is a list")

        task = result_json(await s.call_tool(
            "create_task", {"title": "from python", "pipeline": "fast", "prompt": "say hi"}))
        tid = task["id"]
        check(task["state"] == "idle", f"a new task waits in the backlog: {task}")
        await s.subscribe_resource(f"baton://task/{tid}")
        started = result_json(await s.call_tool("start", {"id": tid}))
        check(started["status"] != "backlog", f"start moved it: {started}")

        # Wait for the gate: each notification says the task changed; read it again then.
        with anyio.fail_after(60):
            while True:
                shown = json.loads((await s.read_resource(f"baton://task/{tid}")).contents[0].text)
                if shown["status"] == "review" and shown["state"] == "waiting":
                    break
                check(shown["state"] not in ("failed", "cancelled"), f"task ended: {shown}")
                uri = await receive.receive()
                check(uri == f"baton://task/{tid}", f"notified for {uri}")
        print("at the gate", flush=True)

        done = result_json(await s.call_tool("approve", {"id": tid, "note": "looks good"}))
        check(done["status"] == "done" and done["state"] == "done", f"approved: {done}")
        check(any(h["trigger"] == "approve" and h["reason"] == "looks good"
                  for h in done["history"]), f"the note is in the history: {done['history']}")

        logs = result_json(await s.call_tool("task_logs", {"id": tid, "step": 1}))
        texts = [line["text"] for line in logs["lines"]]
        check(any("hello from from python" in t for t in texts), f"log lines: {texts}")
        print("logs: " + " | ".join(texts), flush=True)

        check((await s.call_tool("approve", {"id": tid})).is_error, "approving a done task fails")
        v = result_json(await s.call_tool("validate_pipeline", {"text": '{"id": "x",\n "statuses": 3}'}))
        check(not v["ok"] and v["diagnostics"][0]["line"] is not None, f"located error: {v}")


async def modern(params):
    """The 2026-07-28 protocol: `subscriptions/listen` instead of `resources/subscribe`."""
    async with Client(params, mode="auto") as c:
        version = c.session.protocol_version
        task = result_json(await c.call_tool("create_task", {"title": "listened", "pipeline": "fast"}))
        uri = f"baton://task/{task['id']}"
        async with c.listen(resource_subscriptions=[uri]) as sub:
            check(sub.honored.resource_subscriptions == [uri], f"honored: {sub.honored}")
            result_json(await c.call_tool("start", {"id": task["id"]}))
            with anyio.fail_after(30):
                async for event in sub:
                    check(event.uri == uri, f"event for {event}")
                    break
        print(f"listen ok ({version})", flush=True)


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=["--dir", sys.argv[3], "mcp"])
        async with stdio_client(params) as (read, write):
            await scenario(read, write)
        await modern(params)
        print("ok", flush=True)
    else:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {sys.argv[3]}"})
        async with client, streamable_http_client(sys.argv[2], http_client=client) as (read, write):
            await scenario(read, write)
        print("ok", flush=True)


anyio.run(main)
