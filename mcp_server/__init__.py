"""``kernelskill mcp``: kernelskill's commands as Model Context Protocol tools for coding agents.

:mod:`.tools` describes each tool (arguments as a pydantic model, the library call the CLI command makes,
the same JSON as its ``--json``) and needs no MCP SDK; :mod:`.server` serves them over stdio or local
streamable HTTP with the ``mcp`` SDK (the optional extra ``kernelskill[mcp]``).
"""
