"""Integers a database cannot hold (beyond signed 64 bits) are ValidationErrors, never a failure
inside the database driver, in every argument that reaches a column."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sqew
from sqew import errors

BIG = 2**64
INT64_MAX = 2**63 - 1

CALLS: list[tuple[str, Callable[[sqew.Client], Any], str]] = [
    ("ack", lambda c: c.ack("q", BIG, "t"), "id"),
    ("ack_batch", lambda c: c.ack_batch("q", [(BIG, "t")]), "acks[0].id"),
    ("nack", lambda c: c.nack("q", BIG, "t"), "id"),
    ("nack_batch", lambda c: c.nack_batch("q", [{"id": BIG, "token": "t"}]), "nacks[0].id"),
    ("extend_lease", lambda c: c.extend_lease("q", BIG, "t", 1), "id"),
    ("extend_leases", lambda c: c.extend_leases("q", [(BIG, "t", 1)]), "extends[0].id"),
    ("dlq_requeue", lambda c: c.dlq_requeue("q", [BIG]), "ids[0]"),
    ("get_message", lambda c: c.get_message("q", BIG), "id"),
    ("remove_message", lambda c: c.remove_message("q", BIG), "id"),
    ("dlq_list", lambda c: c.dlq_list("q", after_id=BIG), "after_id"),
    ("create_queue", lambda c: c.create_queue("huge", max_depth=BIG), "max_depth"),
    ("update_queue", lambda c: c.update_queue("q", max_depth=INT64_MAX + 1), "max_depth"),
    ("infinite rate", lambda c: c.create_queue("inf", rate_limit_per_s=float("inf")),
     "rate_limit_per_s"),
]


@pytest.mark.parametrize("call", [name for name, _, _ in CALLS])
def test_integers_beyond_64_bits_are_validation_errors(client: sqew.Client, call: str) -> None:
    client.create_queue("q")
    _, fn, field = next(c for c in CALLS if c[0] == call)
    with pytest.raises(errors.ValidationError) as caught:
        fn(client)
    assert caught.value.details and caught.value.details[0]["field"] == field
    assert [q.name for q in client.list_queues()] == ["q", "q.dlq"]


def test_the_largest_64_bit_values_are_accepted(client: sqew.Client) -> None:
    client.create_queue("q", max_depth=INT64_MAX)
    assert client.update_queue("q", max_depth=INT64_MAX).max_depth == INT64_MAX
    with pytest.raises(errors.MessageNotFound):
        client.get_message("q", INT64_MAX)
    with pytest.raises(errors.MessageNotFound):
        client.ack("q", INT64_MAX, "t")
    assert client.dlq_list("q", after_id=INT64_MAX) == []
    assert client.dlq_requeue("q", [INT64_MAX]).requeued == 0
