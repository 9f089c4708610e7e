"""Sizes the wire allows. Bytes are UTF-8 bytes; characters are Unicode code points.

The widget gets the same numbers (widget/protocol.js, generated from this module), so it
refuses locally what the server would refuse, with the same units.
"""

from __future__ import annotations

# A request body, in bytes (``Settings.max_body_bytes`` can lower or raise it per server;
# the widget page passes the server's value to the widget).
MAX_BODY_BYTES = 256 * 1024
# A user message, in characters.
MAX_MESSAGE_CHARS = 8000
# A visitor's comment on a reply (feedback), in characters.
MAX_FEEDBACK_COMMENT_CHARS = 1000
# A rejection reason the model receives, in characters (longer ones are cut).
MAX_REASON_CHARS = 1000
# An error message from a surface or a block, in characters (longer ones are cut).
MAX_ERROR_MESSAGE_CHARS = 1000
# Files one message may carry (an agent file's ``attachments.max_files`` is at most this).
MAX_ATTACHMENTS = 10
