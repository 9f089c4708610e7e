"""Helpers the unit and system tiers share: the app harness, live servers, loopback targets,
PostgreSQL schemas and server processes. The fixtures built on them are in tests/conftest.py."""
