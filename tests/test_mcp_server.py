"""``kernelskill mcp`` end to end: the real server started as a subprocess over stdio, driven by the MCP SDK's
own client. Every tool is called once; results must equal the CLI's ``--json`` output; bad calls must come
back as one-line tool errors while the server keeps serving; no secret may leave the server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("mcp", reason="the MCP SDK (pip install 'kernelskill[mcp]') is not installed")

import anyio  # noqa: E402  (after the skip: anyio comes with the SDK)
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from kernelskill.cli import main  # noqa: E402
from kernelskill.pipeline.runs.redact import Redactor, secret_values  # noqa: E402
from tests.test_loop_helpers import TASK, fenced, kernel  # noqa: E402

HERE = Path(__file__).parent
SMALL = HERE / "data" / "skills_small"
KERNEL = HERE / "corpus" / "elementwise_relu.py"
HELPERS = HERE / "test_loop_helpers.py"
PLUGINS = ["--evaluator", f"{HELPERS}:ScriptedEvaluator", "--retriever", f"{HELPERS}:StandInRetriever"]
SECRET = "sk-mcp-test-5f1b2c3d4e"  # the configured API key: it must never come back
TOOLS = {"query", "features", "kb_search", "kb_show", "eval", "runs_pending", "runs_answer", "runs_resume",
         "bench_report"}


def cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args), env={"KERNELSKILL_LLM_API_KEY": SECRET})
    assert result.exit_code == code, (result.output, result.stderr)
    return result.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the small skill set's KB and one optimize run paused at its first LLM step."""
    h = tmp_path_factory.mktemp("mcp") / "home"
    cli("kb", "init", "--home", str(h), "--skills", str(SMALL))
    task = h.parent / "relu2.py"
    task.write_text(TASK)
    cli("optimize", str(task), "--rounds", "1", "--llm", "exchange", "--home", str(h), *PLUGINS, code=3)
    cli("bench", "run", str(task), "--rounds", "1", "--llm", "exchange", "--home", str(h), "--suite",
        str(h.parent / "suite"), "--no-progress", *PLUGINS, code=3)  # a suite paused at its first LLM step
    return h


def _server(home: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH", "LANG", "TMPDIR")}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
            "KERNELSKILL_LLM_API_KEY": SECRET, "KERNELSKILL_LLM_BASE_URL": "http://agent:hunter2pass@127.0.0.1:9/v1",
            "CUDA_VISIBLE_DEVICES": ""}  # the GPU tools must say "no GPU" even on a GPU machine
    return StdioServerParameters(command=sys.executable, args=["-m", "kernelskill", "mcp", "--home", str(home)],
                                 env=env, cwd=str(HERE.parent))


class Calls:
    """One client session; every reply's text is kept to check for secrets at the end."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.texts: list[str] = []

    async def ok(self, name: str, args: dict[str, Any]) -> Any:
        res = await self.session.call_tool(name, args)
        text = res.content[0].text
        self.texts.append(text)
        assert not res.is_error, f"{name}: {text}"
        assert res.structured_content is not None
        data = json.loads(text)
        assert res.structured_content == (data if isinstance(data, dict) else {"result": data})
        return data

    async def error(self, name: str, args: dict[str, Any]) -> str:
        res = await self.session.call_tool(name, args)
        text = res.content[0].text
        self.texts.append(text)
        assert res.is_error, f"{name} should fail: {text}"
        assert "\n" not in text and "Traceback" not in text, text
        return text


def _no_timings(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "timings_ms"}


def test_every_tool_over_stdio(home: Path) -> None:
    run_id = next((home / "runs").iterdir()).name
    h = ("--home", str(home))

    async def scenario() -> None:
        async with stdio_client(_server(home)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            c = Calls(session)
            listed = await session.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            assert all(t.input_schema.get("type") == "object" and t.description for t in listed.tools)

            # resources: one markdown document per method of the KB
            resources = (await session.list_resources()).resources
            methods = json.loads(cli("kb", "list", "--type", "method", "--json", *h))
            assert sorted(str(r.uri) for r in resources) == sorted(f"kernelskill://methods/{m['id']}"
                                                                     for m in methods)
            doc = await session.read_resource("kernelskill://methods/coalesced_access")
            assert doc.contents[0].text.startswith("# ") and "coalesced_access" in doc.contents[0].text

            # offline tools: the same JSON as the CLI's --json
            q = await c.ok("query", {"kernel": str(KERNEL), "k": 2})
            assert _no_timings(q) == _no_timings(json.loads(cli("query", str(KERNEL), "-k", "2", "--json", "--explain",
                                                                            *h)))
            from_text = await c.ok("query", {"source": KERNEL.read_text(), "k": 2})
            assert (from_text["bottleneck"], from_text["case"], from_text["features"]["values"]) == \
                (q["bottleneck"], q["case"], q["features"]["values"])
            f = await c.ok("features", {"kernel": str(KERNEL), "no_llm": True})
            assert f == json.loads(cli("features", str(KERNEL), "--no-llm", "--json", *h))
            s = await c.ok("kb_search", {"text": "coalesced loads", "k": 3})
            assert s == json.loads(cli("kb", "search", "coalesced loads", "-k", "3", "--json", *h))
            show = await c.ok("kb_show", {"id": "coalesced_access"})
            assert show == json.loads(cli("kb", "show", "coalesced_access", "--json", *h))

            # the GPU tool says so on a machine without one
            assert "no CUDA GPU visible" in await c.error("eval", {"task": str(KERNEL), "kernel": str(KERNEL)})

            # a run paused at its first LLM step: pending, a refused answer, an answer, resume
            pending = await c.ok("runs_pending", {"run": run_id})
            assert pending == json.loads(cli("runs", "pending", run_id, "--json", *h))
            assert [p["id"] for p in pending] == ["r00.generate.1"]
            refused = await c.error("runs_answer", {"run": run_id, "request_id": "r00.generate.1",
                                                    "answer": "I would write a kernel."})
            assert "not a usable generator answer" in refused and "nothing stored" in refused
            stored = await c.ok("runs_answer", {"run": run_id, "request_id": "r00.generate.1",
                                                "answer": fenced(kernel("speedup=1.20", "seed")), "by": "mcp test"})
            assert stored["stored"] is True and stored["role"] == "generator"
            resumed = await c.ok("runs_resume", {"run": run_id})  # no GPU here: it pauses before the seed's eval
            assert resumed["status"] == "paused" and "GPU step" in resumed["waiting"]
            assert (await c.ok("runs_pending", {"run": run_id}))[0]["side"] == "gpu"

            suite = str(home.parent / "suite")
            report = await c.ok("bench_report", {"suite": suite})
            assert report == json.loads(cli("bench", "report", suite, "--json"))
            assert report["overall"]["tasks"] == 1

            # malformed calls: tool errors, and the server keeps serving
            assert "unknown tool 'nope'" in await c.error("nope", {})
            assert "missing argument 'id'" in await c.error("kb_show", {})
            assert "argument 'k'" in await c.error("query", {"kernel": str(KERNEL), "k": "many"})
            assert "unknown argument 'colour'" in await c.error("kb_show", {"id": "x", "colour": "red"})
            assert "exactly one of" in await c.error("query", {"kernel": str(KERNEL), "source": "x"})
            assert "no such kernel file" in await c.error("query", {"kernel": "/nonexistent/k.py"})
            assert "no such profile file" in await c.error("query", {"kernel": str(KERNEL),
                                                                      "profile": "/nonexistent/p.csv"})
            assert "not found" in await c.error("runs_pending", {"run": "no-such-run"})
            assert await c.error("bench_report", {"suite": str(home.parent / "no-suite")})
            assert "no KB object" in await c.error("kb_show", {"id": "missing_method"})
            assert "no_such_field" in await c.error("query", {"kernel": str(KERNEL), "context": {"no_such_field": 1}})
            assert "not a kernel source" in await c.error("features", {"kernel": str(SMALL / "methods.yaml")})
            echoed = await c.error("kb_show", {"id": SECRET})  # a secret in an error message is masked
            assert "[redacted]" in echoed
            assert (await c.ok("kb_show", {"id": "coalesced_access"})) == show  # still serving

            for text in c.texts:
                assert SECRET not in text and "hunter2pass" not in text

    anyio.run(scenario)


def test_redactor_masks_keys_and_url_credentials() -> None:
    env = {"OPENAI_API_KEY": "sk-abcdef123456", "MY_SERVICE_TOKEN": "tok-0987654321", "PATH": "/usr/bin",
           "SHORT_TOKEN": "abc"}
    r = Redactor(secret_values(env))
    text = ("key sk-abcdef123456 and tok-0987654321 via https://me:pw@host/v1?api_key=zzz&x=1 "
            "on /usr/bin, abc")
    assert r.text(text) == ("key [redacted] and [redacted] via https://[redacted]@host/v1?api_key=[redacted]&x=1 "
                            "on /usr/bin, abc")
    assert r.value({"a": [text], "n": 1}) == {"a": [r.text(text)], "n": 1}


def test_http_transport_lists_tools(home: Path) -> None:
    """``--http PORT``: the same tools over streamable HTTP on 127.0.0.1."""
    import socket
    import subprocess

    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    params = _server(home)
    proc = subprocess.Popen([params.command, *params.args, "--http", str(port)], env=params.env, cwd=params.cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async def scenario() -> None:
            for _ in range(300):  # until it listens (imports take a few seconds on a small machine)
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await anyio.sleep(0.1)
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams, \
                    ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS
                res = await session.call_tool("kb_show", {"id": "coalesced_access"})
                assert not res.is_error and res.structured_content["id"] == "coalesced_access"

        anyio.run(scenario)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
