"""The audit log page (admins): newest first, paged by id."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from hostcall.console.accounts import Role
from hostcall.console.render import page
from hostcall.console.session import guarded, operator_of
from hostcall.protocol.numbers import whole_number
from hostcall.runtime import services_of

PAGE_SIZE = 50


@guarded(Role.ADMIN)
async def audit_page(request: Request) -> Response:
    raw = request.query_params.get("before")
    before = whole_number(raw, "before", low=1) if raw is not None else None
    entries = await services_of(request).audit.page(limit=PAGE_SIZE + 1, before=before)
    return page(
        request,
        "audit.html",
        operator_of(request),
        entries=entries[:PAGE_SIZE],
        older=entries[PAGE_SIZE - 1].id if len(entries) > PAGE_SIZE else None,
    )
