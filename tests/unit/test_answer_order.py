"""What the page's answer waits for before its response (docs/protocol.md, ``POST
/api/calls/{callId}/result``): the call's ``TOOL_CALL_RESULT`` and, when the answer resumes
the run, the next step's first text are on the streams first; the rest of the step is not
waited for, even from a model that answers in a burst (the demo's scripted one)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.harness import BOARD, Harness


def test_the_answer_waits_for_the_resumed_first_text_and_not_for_the_whole_step(
    tmp_path: Path, agents_dir: Path
) -> None:
    h = Harness(tmp_path, agents_dir)
    try:
        conv = h.conversation()
        h.say(conv, "What should I work on next?")
        call = h.open_call(conv, "dispatched")
        seen: list[str] = []

        async def answer() -> None:
            # In the app's own loop, the request awaited by this task: what the log holds
            # when the response is complete is what the handler waited for.
            transport = httpx.ASGITransport(app=h.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                r = await c.post(
                    f"/api/calls/{call['toolCallId']}/result",
                    json={"token": call["resultToken"], "output": BOARD},
                )
                assert r.status_code == 200, r.text
            events = await h.runtime.store.events_after(conv.id, 0)
            seen.extend(e.name for e in events)

        h.call(answer)
        answered = seen[seen.index("TOOL_CALL_RESULT") :]
        assert answered[:2] == ["TOOL_CALL_RESULT", "TEXT_MESSAGE_START"], seen
        assert "TEXT_MESSAGE_END" not in answered and "RUN_FINISHED" not in answered, seen
        # The rest of the step comes after, whole.
        assert h.finish(conv)["run"]["status"] == "finished"
        names = [name for name, _ in h.events(conv)]
        assert names[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    finally:
        h.stop()
