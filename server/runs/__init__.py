"""The run engine's parts (server/engine.py puts them together)."""
