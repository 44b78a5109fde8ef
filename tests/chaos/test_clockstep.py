"""The ``clock-step`` oracle on hand-written journals: each poll is judged by its taker's
clock, the server's mapped through the offset timeline the harness journalled
(``chaos.clockstep``)."""

from __future__ import annotations

from typing import Any

from chaos import leases
from chaos.clockserve import ClockServer, Step
from chaos.clockstep import Timeline, lease_check

AHEAD = [Step(sent=99.0, seen=99.01, before=0, after=30_000)]
"""The server's clock stepped 30 s forward just before the polls."""
BEHIND = [Step(sent=99.0, seen=99.01, before=0, after=-30_000)]


def _poll(msg: int, token: str, attempts: int, t0: float, t1: float,
          expires_s: float) -> dict[str, Any]:
    return {"op": "poll", "queue": "q", "t0": t0, "t1": t1, "wait_ms": 0,
            "messages": [{"id": msg, "token": token, "attempts": attempts,
                          "lease_expires_at": int(expires_s * 1000)}]}


def _check(steps: list[Step], journals: dict[str, list[dict[str, Any]]]) -> list[str]:
    server = ClockServer("unused.db", log=None)  # type: ignore[arg-type]
    server.steps = steps
    return [v.kind for v in lease_check(server)(journals)]


def test_a_step_moves_the_moment_the_server_reaches_a_time() -> None:
    assert Timeline([]).reaches(12_000, after=5.0) == 12.0
    assert Timeline(AHEAD).reaches(135_000, after=100.0) == 105.0  # 30 s early
    assert Timeline(BEHIND).reaches(101_000, after=100.0) == 131.0  # 30 s late
    assert Timeline(AHEAD).reaches(101_000, after=100.0) == 100.0  # already past
    # While the step is in flight, the server may already have the larger offset.
    assert Timeline(AHEAD).reaches(129_005, after=99.0) == 99.005


def test_a_server_ahead_may_take_a_lease_the_file_gave_before_its_real_end() -> None:
    journals = {"consumer-local.1": [_poll(1, "a", 1, 100.0, 100.01, 101.0)],
                "consumer-http.1": [_poll(1, "b", 2, 100.2, 100.3, 131.3)]}
    assert _check(AHEAD, journals) == []
    # Judged by the real clock alone, that was a second holder: the per-clock view matters.
    assert [v.kind for v in leases.check(journals)] == ["held-by-two"]


def test_a_poll_on_the_file_is_judged_by_the_real_clock() -> None:
    journals = {"consumer-local.1": [_poll(1, "a", 1, 100.0, 100.01, 101.0)],
                "consumer-local.2": [_poll(1, "b", 2, 100.2, 100.3, 101.3)]}
    assert _check(AHEAD, journals) == ["held-by-two"]


def test_a_server_behind_must_not_take_its_own_lease_before_its_clock_ends_it() -> None:
    # The server, 30 s behind, leased until its 71 s: 101 s by the real clock.
    journals = {"consumer-http.1": [_poll(1, "a", 1, 100.0, 100.01, 71.0)],
                "consumer-http.2": [_poll(1, "b", 2, 100.5, 100.6, 71.6)]}
    assert _check(BEHIND, journals) == ["held-by-two"]
    # The file's clock says that lease ended long ago: a poll there may take it.
    journals["consumer-local.1"] = journals.pop("consumer-http.2")
    assert _check(BEHIND, journals) == []
