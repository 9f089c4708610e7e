"""Hostcall: an embeddable chat agent whose tools run in the host page."""

__version__ = "0.1.0"
