"""Page routes (placeholder until the widget lands)."""

from starlette.routing import BaseRoute


def page_routes() -> list[BaseRoute]:
    return []
