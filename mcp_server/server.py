"""The MCP server: :mod:`.tools` and :mod:`.resources` served with the ``mcp`` SDK's low-level ``Server``.

A tool's result carries the CLI's ``--json`` text as its text content and the same JSON as its structured
content (MCP wants an object there: a list comes wrapped as ``{"result": [...]}``). A bad call (unknown
tool, missing or wrong-typed argument, a :class:`KernelskillError` from the library) is an MCP tool error
whose text is one line; an unexpected exception is logged on stderr with its traceback and reported as
one line too, so the server keeps serving. Secrets never leave the server (:mod:`kernelskill.pipeline.runs.redact`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from kernelskill import __version__
from kernelskill.commands._common import Ctx, json_text
from kernelskill.errors import KernelskillError
from kernelskill.pipeline.runs.redact import Redactor, register_settings

from .resources import list_methods, method_markdown
from .tools import TOOLS, Tool, cuda_visible

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "kernelskill answers which optimization methods apply to a GPU kernel and why (query, features, kb_search, "
    "kb_show; offline), evaluates ModelNew candidates on a CUDA GPU (eval), and drives optimize runs whose LLM "
    "steps an agent answers (runs_pending, runs_answer, runs_resume). Paths are read on the server's machine. "
    "Each method of the knowledge base is a resource kernelskill://methods/<id>."
)


def _arg_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            parts.append(f"missing argument {loc!r}")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown argument {loc!r}")
        else:
            parts.append(f"argument {loc!r}: {msg}" if loc else msg)
    return f"{tool}: " + "; ".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class KernelskillMCP:
    """The tools and resources over one kernelskill home; one tool call runs at a time."""

    def __init__(self, home: Path | None = None) -> None:
        self.ctx = Ctx(home=home, json=True)
        self._lock = anyio.Lock()
        self.server: Server[Any] = Server(
            "kernelskill", version=__version__, instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource)

    def redactor(self) -> Redactor:
        try:
            register_settings(self.ctx.settings())
        except KernelskillError:
            pass
        return Redactor()

    # -- tools --------------------------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.args.model_json_schema())
            for t in TOOLS.values()])

    def run_tool(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """Validate the arguments and run the tool in this thread; raises KernelskillError on bad input."""
        try:
            args = tool.args.model_validate(arguments)
        except ValidationError as exc:
            raise KernelskillError(_arg_error(tool.name, exc)) from None
        if tool.needs_gpu and not cuda_visible():
            raise KernelskillError(f"{tool.name}: no CUDA GPU visible on the machine running the MCP server "
                                   "(run the server on a GPU machine for this tool)")
        return tool.run(self.ctx, args)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        redactor = self.redactor()
        tool = TOOLS.get(params.name)
        if tool is None:
            return _error(f"unknown tool {params.name!r} (tools: {', '.join(TOOLS)})")
        async with self._lock:
            try:
                data = await anyio.to_thread.run_sync(self.run_tool, tool, dict(params.arguments or {}))
            except KernelskillError as exc:
                return _error(redactor.text(_one_line(str(exc))))
            except Exception as exc:  # a bug or an environment problem: keep serving, say it in one line
                log.exception("tool %s failed", tool.name)
                return _error(redactor.text(_one_line(f"{tool.name}: {type(exc).__name__}: {exc}")))
        text = redactor.text(json_text(data))
        structured = json.loads(text)
        if not isinstance(structured, dict):
            structured = {"result": structured}
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured)

    # -- resources ----------------------------------------------------------------------------
    def _store(self) -> Any:
        from kernelskill.kb.home import open_store

        return open_store(self.ctx.settings(), read_only=True)

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        def work() -> list[Any]:
            with self._store() as store:
                return list_methods(store)

        async with self._lock:
            try:
                found = await anyio.to_thread.run_sync(work)
            except KernelskillError as exc:
                raise MCPError(code=types.INTERNAL_ERROR, message=_one_line(str(exc))) from None
        return types.ListResourcesResult(resources=[
            types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description,
                           mime_type="text/markdown") for r in found])

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)

        def work() -> str:
            with self._store() as store:
                return method_markdown(store, uri)

        async with self._lock:
            try:
                text = await anyio.to_thread.run_sync(work)
            except KernelskillError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=_one_line(str(exc)), data={"uri": uri}) from None
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, text=self.redactor().text(text), mime_type="text/markdown")])

    # -- transports ---------------------------------------------------------------------------
    async def serve_stdio(self) -> None:
        # stdio_server moves fd 1 to stderr while serving: stray output of a tool or a child misses the wire
        async with stdio_server() as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

    async def serve_http(self, port: int, host: str = "127.0.0.1") -> None:
        import uvicorn  # a dependency of the mcp SDK

        app = self.server.streamable_http_app(host=host)
        log.warning("kernelskill MCP server on http://%s:%d/mcp", host, port)
        await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
