# Approval policies bound to arguments (issue 27) with the official MCP Python SDK as the client: a tool whose policy
# is `ask` is put to the SDK's elicitation callback (an elicitation request in the legacy era, an input-required result
# the SDK answers on retry in 2026-07-28), with the server, the tool and the exact arguments; approve once, approve for
# the session (the same call then passes without asking), deny and decline (`approval_denied`), and the registry's
# `proxy_call`, and a code-mode script's call to the tool (issue 28). Usage:
# python python_approval_check.py BIN FIXTURE DATA_DIR MODE (BIN is agent-discover, FIXTURE the agent-discover-fixture
# test server; MODE is "auto", which negotiates 2026-07-28, or "legacy"). Exits non-zero with a message on any failure.
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters, types


def payload(result):
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def main(bin_path: str, fixture_path: str, data_dir: str, mode: str) -> None:
    env = dict(os.environ, AGENT_DISCOVER_DASHBOARD="off")
    params = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "mcp"], env=env)
    asked = []
    answer = {"decision": "approve"}

    async def on_elicit(_context, request):
        asked.append(request.message)
        schema = request.requested_schema or {}
        offered = [c["const"] for c in schema["properties"]["decision"]["oneOf"]]
        # Over stdio the connection is the session, in both eras: "for this session" is offered.
        assert offered == ["approve", "approve_session", "deny"], offered
        if answer["decision"] == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": answer["decision"]})

    async with Client(params, mode=mode, elicitation_callback=on_elicit, raise_exceptions=True) as client:
        version = client.protocol_version
        if mode == "auto":
            assert version == "2026-07-28", f"negotiated {version}"
        name = "pyfx"
        for args in [
            {"action": "install", "name": name, "command": fixture_path, "args": ["--name", name]},
            {"action": "activate", "name": name},
            {"action": "tool_policy", "name": name, "tool": "echo", "policy": "ask"},
        ]:
            r = await client.call_tool("registry", args)
            assert not r.is_error, payload(r)
        echo = f"{name}__echo"

        # Approved once: the callback saw the server, the tool and the exact arguments.
        r = await client.call_tool(echo, {"text": "from python", "n": {"b": 2, "a": 1}})
        assert not r.is_error and payload(r) == "from python", payload(r)
        assert len(asked) == 1, asked
        assert "Server: pyfx" in asked[0] and "Tool: echo" in asked[0], asked[0]
        assert '"text": "from python"' in asked[0] and '"a": 1' in asked[0], asked[0]
        # Once means once.
        r = await client.call_tool(echo, {"text": "from python", "n": {"a": 1, "b": 2}})
        assert not r.is_error and len(asked) == 2, asked

        # For the session: the same call passes without asking, another one asks.
        answer["decision"] = "approve_session"
        r = await client.call_tool(echo, {"text": "again"})
        assert not r.is_error and len(asked) == 3, asked
        answer["decision"] = "deny"
        r = await client.call_tool(echo, {"text": "again"})
        assert not r.is_error and payload(r) == "again" and len(asked) == 3, (payload(r), asked)
        r = await client.call_tool(echo, {"text": "other"})
        assert r.is_error and payload(r)["kind"] == "approval_denied", payload(r)
        assert len(asked) == 4, asked

        # Declined: denied too.
        answer["decision"] = "decline"
        r = await client.call_tool(echo, {"text": "declined"})
        assert r.is_error and payload(r)["kind"] == "approval_denied", payload(r)

        # The registry's proxy_call takes the same step.
        answer["decision"] = "approve"
        r = await client.call_tool("registry", {"action": "proxy_call", "server": name, "tool": "echo",
                                                "arguments": {"text": "via proxy_call"}})
        assert not r.is_error and payload(r) == "via proxy_call", payload(r)
        assert len(asked) == 6, asked

        # Code mode (issue 28): a script's call to the `ask` tool pauses the script; the question reaches this client
        # the same way, with the exact arguments, and the script goes on with the answer.
        code = f"const a = await tools.{name}.echo({{text: 'from a script'}}); return a.toUpperCase();"
        r = await client.call_tool("run_script", {"code": code})
        assert not r.is_error and payload(r)["result"] == "FROM A SCRIPT", payload(r)
        assert len(asked) == 7 and '"text": "from a script"' in asked[6], asked
        answer["decision"] = "deny"
        code = f"try {{ await call('{echo}', {{text: 'no'}}); }} catch (e) {{ return e.kind; }}"
        r = await client.call_tool("run_script", {"code": code})
        assert not r.is_error and payload(r)["result"] == "approval_denied", payload(r)
        assert len(asked) == 8, asked
        print(f"ok: approvals in {version}")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
    except Exception as e:  # report the failure as one line and a non-zero exit
        import traceback; traceback.print_exc()
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
