"""MCP servers as tool blocks (docs/agents.md, "MCP servers").

The operator declares servers in ``_platform.json`` (``servers.py``) and names, per
environment, the ones its agents may use; an agent exposes some or all of a server's tools
(``binding.py``). A run reads each server's tool list when it starts and keeps it
(``freezing.py``); a call goes through the process's pooled sessions (``pool.py``), and its
result reaches the model in a bounded form (``results.py``).
"""
