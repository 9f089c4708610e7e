"""The built-in kinds of server-side tool, one file each (registered in ../registry.py)."""
