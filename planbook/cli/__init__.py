"""The command line surface: ``planbook`` (:mod:`.main`), its run listing, its approval
prompt, the bundled demo and ``planbook mcp serve`` (planbook as an MCP server)."""
