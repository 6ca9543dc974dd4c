# Interop check with the official MCP Python SDK: activation, proxied calls, resources, prompts and list_changed
# through `agent-discover mcp`, in both protocol eras; a tool that elicits, on a legacy-era child and on a 2026-07-28
# child, called directly and through the registry's `proxy_call`. Usage:
# python python_proxy_check.py BIN FIXTURE DATA_DIR MODE (BIN is agent-discover, FIXTURE the agent-discover-fixture
# test server; MODE is "auto", which negotiates 2026-07-28, or "legacy"). Exits non-zero with a message on any failure.
import asyncio
import json
import os
import sys

import anyio
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
    changed = anyio.Event()

    async def on_message(message) -> None:
        # Handshake-era clients receive notifications/tools/list_changed as plain messages.
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/tools/list_changed":
            changed.set()

    asked = []

    async def on_elicit(_context, request):
        # Answers every field the form asks for (the legacy fixture asks `answer`, the 2026 one `name`).
        asked.append(request.message)
        fields = (request.requested_schema or {}).get("properties", {})
        return types.ElicitResult(action="accept", content={k: "Ada" for k in fields})

    async with Client(params, mode=mode, message_handler=on_message, elicitation_callback=on_elicit,
                      raise_exceptions=True) as client:
        version = client.protocol_version
        expected = "2026-07-28" if mode == "auto" else None
        assert client.server_info is None or client.server_info.name == "agent-discover", client.server_info
        if expected:
            assert version == expected, f"negotiated {version}, expected {expected}"
        name = f"pyfx{mode}"
        r = await client.call_tool("registry", {"action": "install", "name": name, "command": fixture_path,
                                                "args": ["--resources", "1", "--prompts", "1"]})
        assert not r.is_error, payload(r)
        listed = payload(await client.call_tool("registry", {"action": "list"}))
        assert [s["name"] for s in listed] == [name], listed

        async def activate() -> None:
            r = await client.call_tool("registry", {"action": "activate", "name": name})
            assert not r.is_error, payload(r)

        if version >= "2026-07-28":
            async with client.listen(tools_list_changed=True) as sub:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(activate)
                    with anyio.fail_after(20):
                        async for _event in sub:
                            break
        else:
            await activate()
            with anyio.fail_after(20):
                await changed.wait()

        tools = [t.name for t in (await client.list_tools()).tools]
        assert f"{name}__echo" in tools, tools
        r = await client.call_tool(f"{name}__echo", {"text": "from python"})
        assert payload(r) == "from python", payload(r)
        resources = (await client.list_resources()).resources
        # agent-discover's own registry snapshot comes first, then the children's resources.
        assert str(resources[0].uri) == "agent-discover://registry", resources
        uri = str(resources[1].uri)
        assert uri == f"agent-discover://{name}/fixture://resource/1", uri
        read = await client.read_resource(uri)
        assert "contents of fixture://resource/1" in read.contents[0].text, read
        prompt = await client.get_prompt(f"{name}__prompt_1", {"topic": "interop"})
        assert "about interop" in str(prompt.messages[0].content), prompt
        # A tool that elicits, behind each era: the legacy child sends elicitation/create during the call (relayed
        # as a request to a legacy client, or minted into an input-required result for a 2026-07-28 client); the
        # 2026 child answers with an input-required result (relayed, or turned into a request for a legacy client).
        for child, flags, tool, args in [
            ("pyold", [], "elicit", {"message": "Your name?"}),
            ("pynew", ["--conformance"], "test_input_required_result_elicitation", {}),
        ]:
            r = await client.call_tool("registry", {"action": "install", "name": child, "command": fixture_path,
                                                    "args": ["--name", child, *flags]})
            assert not r.is_error, payload(r)
            r = await client.call_tool("registry", {"action": "activate", "name": child})
            assert not r.is_error, payload(r)
            before = len(asked)
            r = await client.call_tool(f"{child}__{tool}", args)
            assert not r.is_error and "Ada" in str(payload(r)), payload(r)
            assert len(asked) == before + 1, asked
            r = await client.call_tool("registry", {"action": "proxy_call", "server": child, "tool": tool,
                                                    "arguments": args})
            assert not r.is_error and "Ada" in str(payload(r)), payload(r)
            assert len(asked) == before + 2, asked
            r = await client.call_tool("registry", {"action": "uninstall", "name": child})
            assert payload(r)["status"] == "uninstalled", payload(r)
        r = await client.call_tool("registry", {"action": "deactivate", "name": name})
        assert payload(r)["status"] == "deactivated", payload(r)
        r = await client.call_tool("registry", {"action": "uninstall", "name": name})
        assert payload(r)["status"] == "uninstalled", payload(r)
        assert payload(await client.call_tool("registry", {"action": "list"})) == [], "uninstall left the server listed"
        print(f"ok: python SDK ({mode}) negotiated {version}")


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
    except Exception as e:  # report the failure as one line and a non-zero exit
        import traceback; traceback.print_exc()
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
