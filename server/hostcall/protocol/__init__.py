"""The wire: the only package that knows Hostcall's names and camelCase.

    events     one frozen class per stream event (AG-UI's, and ours as AG-UI CUSTOM),
               and the encoder
    frames     stored, numbered events; SSE framing; Last-Event-ID
    responses  response bodies (the CALL shape, ...)
    reading    request bytes → JSON (the single point where bodies are parsed)
    wire       typed object → camelCase JSON

The rest of the server passes the typed objects; docs/protocol.md documents the same shapes.
"""
