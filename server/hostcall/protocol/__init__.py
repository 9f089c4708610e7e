"""The wire: the only package that knows Hostcall's names and camelCase.

    events     one frozen class per stream event (AG-UI's, and ours as AG-UI CUSTOM),
               and the encoder
    frames     stored, numbered events; SSE framing; Last-Event-ID
    responses  one frozen class per response body (the CALL shape, the snapshot, errors...)
    console    the same for the console's JSON routes
    requests   request bodies, decoded into typed objects
    reading    request bytes → JSON (the single point where bodies are parsed)
    wire       typed object → camelCase JSON
    schema     typed object's class → the JSON Schema of what ``wire`` writes
    openapi    /openapi.json, its response schemas from ``schema``
    codes      the error codes, as enums

The rest of the server passes the typed objects; docs/protocol.md documents the same shapes.
"""
