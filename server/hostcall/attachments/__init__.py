"""Files a visitor attaches to a message: what an agent file admits (``policy``), what a
file's bytes are (``sniff``), whether an upload may be kept (``admission``), and what a
model is given of them (``for_model``). docs/agents.md has the agent file's block,
docs/protocol.md the routes."""
