"""The run engine's parts (hostcall/engine.py puts them together)."""
