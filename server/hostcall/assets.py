"""Where the widget's files and the demo's files are, in a checkout and in an installed wheel.

The repository keeps ``widget/`` and ``demo/`` at its top level (they are read as they are
written: no build step). The wheel ships them inside the ``hostcall`` package as
``hostcall/widget`` and ``hostcall/demo`` (``[tool.setuptools.package-dir]`` in pyproject.toml),
so an installed Hostcall finds them through the package with ``importlib.resources``; a
checkout (editable install, or ``python -m hostcall`` from the repository) falls back to the
top-level folders.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

#: The repository root when running from a checkout (in a wheel: site-packages, unused).
SOURCE_ROOT = Path(__file__).resolve().parents[2]

Shipped = Literal["widget", "demo"]


def shipped_dir(name: Shipped) -> Path:
    """The directory of ``widget`` or ``demo`` files, wherever Hostcall was installed."""
    # A wheel installs into a plain directory, so the Traversable is a real path.
    packaged = Path(str(files("hostcall").joinpath(name)))
    if packaged.is_dir():
        return packaged
    return SOURCE_ROOT / name


def in_checkout() -> bool:
    """True when running from a checkout (its pyproject.toml beside ``server/``)."""
    return (SOURCE_ROOT / "pyproject.toml").is_file() and (SOURCE_ROOT / "widget").is_dir()


WIDGET_DIR = shipped_dir("widget")
DEMO_DIR = shipped_dir("demo")
DEMO_AGENTS = DEMO_DIR / "agents"
DEMO_HOST = DEMO_DIR / "host"
