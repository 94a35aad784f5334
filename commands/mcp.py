"""``kernelskill mcp``: serve kernelskill's tools to a coding agent over the Model Context Protocol.

stdio by default (the agent starts this command); ``--http PORT`` serves streamable HTTP on 127.0.0.1 for a
client that connects to a running server. Needs the optional extra: ``pip install 'kernelskill[mcp]'``.
"""

from __future__ import annotations

import click

from kernelskill.commands._common import Ctx, common_options
from kernelskill.errors import KernelskillError


@click.command("mcp")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
              help="Serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio.")
@common_options
def mcp_cmd(ctx: Ctx, http_port: int | None) -> None:
    """Serve query, features, kb_search, kb_show, eval, runs_pending, runs_answer, runs_resume and
    bench_report as MCP tools, and each KB method as a resource (kernelskill://methods/<id>)."""
    try:
        import anyio

        from kernelskill.mcp_server.server import KernelskillMCP  # needs the optional mcp SDK
    except ImportError as exc:
        raise KernelskillError(f"kernelskill mcp needs the MCP SDK: pip install 'kernelskill[mcp]' ({exc})") from None
    server = KernelskillMCP(home=ctx.home)
    if http_port is None:
        anyio.run(server.serve_stdio)
    else:
        anyio.run(server.serve_http, http_port)
