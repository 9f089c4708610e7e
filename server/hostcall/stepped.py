"""A coroutine run by hand as far as it goes without waiting, and the rest of it awaited.

Two places on the round trip's path use it: a request's body that uvicorn has already read
is taken without arming a timer (hostcall/middleware.py), and a publisher writes a live
event to an idle stream's socket itself, handing the rest to the stream's side only if the
socket makes it wait (hostcall/sse_response.py).
"""

from __future__ import annotations

import types
from collections.abc import Generator
from typing import Any, TypeVar

T = TypeVar("T")


@types.coroutine
def resumed(coroutine: types.CoroutineType[Any, Any, T], pending: Any) -> Generator[Any, Any, T]:
    """The rest of ``coroutine``, already stepped once to ``pending`` (what it waits on),
    as ``await`` would run it: what it is sent or thrown goes on to it."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # a cancellation, a deadline's among them
            try:
                pending = coroutine.throw(exc)
            except StopIteration as done:
                result: T = done.value
                return result
            continue
        try:
            pending = coroutine.send(sent)
        except StopIteration as done:
            result = done.value
            return result
