"""uvicorn's access log, minus credentials: a URL's ``token`` is printed as ``…``.

The events URL carries a stream ticket (``?token=``) because ``EventSource`` cannot send
headers. The ticket is single use and short-lived, but a log is read by more people than
the widget is, so it never holds one.
"""

from __future__ import annotations

import logging
import re

_TOKEN = re.compile(r"([?&](?:token|ticket)=)[^&\s]*", re.IGNORECASE)


class RedactTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN.sub(r"\1…", arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def install() -> None:
    """Idempotent: attach the filter to uvicorn's access logger."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in logger.filters):
        logger.addFilter(RedactTokens())
