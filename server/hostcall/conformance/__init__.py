"""A replay contract anyone can run: ``hostcall conformance URL`` checks, against any AG-UI
endpoint, the human-in-the-loop guarantees that clients most often find broken (a pending
step lost or run again after a reload, a reconnect or a replay), each as a named case with a
pass/fail table (docs/testing.md). It speaks only AG-UI over HTTP: nothing here imports the
server.
"""
