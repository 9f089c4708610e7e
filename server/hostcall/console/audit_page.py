"""The audit log page (admins): newest first, paged by id."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from hostcall.console.accounts import Role
from hostcall.console.render import page
from hostcall.console.session import guarded, operator_of
from hostcall.errors import BadRequest

PAGE_SIZE = 50


@guarded(Role.ADMIN)
async def audit_page(request: Request) -> Response:
    before = request.query_params.get("before")
    if before is not None and not before.isdigit():
        raise BadRequest("before must be an entry number", field="before")
    store = request.app.state.hostcall.store
    entries = await store.list_audit(limit=PAGE_SIZE + 1, before=int(before) if before else None)
    return page(
        request,
        "audit.html",
        operator_of(request),
        entries=entries[:PAGE_SIZE],
        older=entries[PAGE_SIZE - 1].id if len(entries) > PAGE_SIZE else None,
    )
