"""The lease rules of the oracle (``chaos.leases``) on hand-written journals: each rule finds
its violation, and nothing is reported where the timing leaves room for an honest run."""

from __future__ import annotations

from typing import Any

import pytest

from chaos import leases
from chaos.journal import Record

Q = "jobs"


def poll(t0: float, t1: float, msg: int, token: str, attempts: int,
         expires: float) -> Record:
    """A poll answered with one lease (``expires`` in seconds)."""
    return {"op": "poll", "queue": Q, "t0": t0, "t1": t1, "messages": [
        {"id": msg, "token": token, "attempts": attempts,
         "lease_expires_at": int(expires * 1000)}]}


def settle(op: str, t0: float, msg: int, token: str, outcome: str = "ok",
           **extra: Any) -> list[Record]:
    """An ack, nack or extend (with its intent line for an ack or nack)."""
    base = {"queue": Q, "id": msg, "token": token}
    intent = [{"op": f"{op}-intent", **base, "t0": t0}] if op in ("ack", "nack") else []
    return [*intent, {"op": op, **base, "t0": t0, "t1": t0 + 0.01, "outcome": outcome,
                      **extra}]


def kinds(journals: dict[str, list[Record]]) -> list[str]:
    return sorted(v.kind for v in leases.check(journals))


A_HOLDS = poll(10.0, 10.01, 1, "ta", 1, expires=11.5)


def test_a_poll_after_the_lease_expired_and_a_late_ack_refused_are_fine() -> None:
    assert kinds({"a": [A_HOLDS, *settle("ack", 11.7, 1, "ta", "LeaseLost")],
                  "b": [poll(11.6, 11.61, 1, "tb", 2, 13.1), *settle("ack", 11.8, 1, "tb")]}
                 ) == []


def test_a_poll_answered_inside_anothers_lease_is_held_by_two() -> None:
    found = leases.check({"a": [A_HOLDS], "b": [poll(10.5, 10.52, 1, "tb", 2, 12.0)]})
    assert [v.kind for v in found] == ["held-by-two"]
    assert "b polled it" in found[0].detail and "a held it" in found[0].detail


@pytest.mark.parametrize(("t0", "t1"), [
    (11.48, 11.49),  # within the slack of the lease's end: the clock's milliseconds
    (9.99, 10.3),    # sent before the other's poll was answered: the order is unknown
    (11.2, 11.6),    # answered after the lease's end
])
def test_polls_the_timing_cannot_place_inside_the_lease_are_not_reported(
        t0: float, t1: float) -> None:
    assert kinds({"a": [A_HOLDS], "b": [poll(t0, t1, 1, "tb", 2, 13.0)]}) == []


@pytest.mark.parametrize("outcome", ["ok", "unknown", "LeaseLost"])
def test_a_lease_ends_when_its_holder_sends_an_ack_whatever_came_of_it(outcome: str) -> None:
    assert kinds({"a": [A_HOLDS, *settle("ack", 10.4, 1, "ta", outcome)],
                  "b": [poll(10.45, 10.46, 1, "tb", 2, 12.0)]}) == []


def test_a_nack_ends_the_lease() -> None:
    assert kinds({"a": [A_HOLDS, *settle("nack", 10.4, 1, "ta", delay_ms=0)],
                  "b": [poll(10.45, 10.46, 1, "tb", 2, 12.0)]}) == []


def test_a_successful_extend_makes_a_new_certain_interval() -> None:
    extended = settle("extend", 11.0, 1, "ta", ms=1500, lease_expires_at=12_500)
    refused = settle("extend", 11.0, 1, "ta", "LeaseLost", ms=1500)
    b = [poll(12.0, 12.01, 1, "tb", 2, 13.5)]
    assert kinds({"a": [A_HOLDS, *extended], "b": b}) == ["held-by-two"]
    assert kinds({"a": [A_HOLDS, *refused], "b": b}) == []


def test_an_extend_to_now_ends_the_lease() -> None:
    extended = settle("extend", 10.2, 1, "ta", ms=0, lease_expires_at=10_205)
    assert kinds({"a": [A_HOLDS, *extended], "b": [poll(10.3, 10.31, 1, "tb", 2, 12.0)]}
                 ) == []


def test_an_ack_that_succeeds_after_a_newer_lease_was_answered_is_stale() -> None:
    b = [poll(11.6, 11.61, 1, "tb", 2, 13.1)]
    assert kinds({"a": [A_HOLDS, *settle("ack", 11.7, 1, "ta")], "b": b}) == ["stale-settle"]
    assert kinds({"a": [A_HOLDS, *settle("nack", 11.7, 1, "ta")], "b": b}) == ["stale-settle"]
    # Sent before the newer lease was answered: the ack may have come first.
    assert kinds({"a": [A_HOLDS, *settle("ack", 11.55, 1, "ta")], "b": b}) == []


def test_two_leases_with_the_same_attempt_are_reported_whatever_their_times() -> None:
    assert kinds({"a": [A_HOLDS], "b": [poll(20.0, 20.01, 1, "tb", 1, 21.5)]}
                 ) == ["same-attempt"]


def test_two_successful_acks_of_one_message_are_reported() -> None:
    b = [poll(11.6, 11.61, 1, "tb", 2, 13.1), *settle("ack", 11.62, 1, "tb")]
    assert kinds({"a": [A_HOLDS, *settle("ack", 11.0, 1, "ta")], "b": b}) == ["acked-twice"]


def test_other_messages_and_queues_do_not_mix() -> None:
    other = poll(10.5, 10.52, 2, "tb", 1, 12.0)
    elsewhere = {**poll(10.5, 10.52, 1, "tc", 1, 12.0), "queue": "plain"}
    assert kinds({"a": [A_HOLDS], "b": [other, elsewhere]}) == []
