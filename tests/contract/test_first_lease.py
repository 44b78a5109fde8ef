"""A leased message's ``first_leased_at``: the time of its first lease, kept by later leases,
started again by a requeue from the DLQ (docs/rest.md, "Objects")."""

from __future__ import annotations

import sqew
from sqew.core.clock import ManualClock

from .helpers import lease_one


def test_first_lease_time_is_kept_then_started_again_by_a_requeue(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("q", visibility_ms=1000, max_attempts=2)
    client.enqueue("q", {"n": 1})
    first_at = clock()
    first = lease_one(client, "q")
    assert (first.attempts, first.first_leased_at) == (1, first_at)
    clock.advance(5000)  # the lease ended: leased again, later
    second = lease_one(client, "q")
    assert (second.attempts, second.first_leased_at) == (2, first_at)
    assert second.lease_expires_at == clock() + 1000
    client.nack("q", second.id, second.token, dead_letter=True)
    (dead,) = client.dlq_list("q")
    assert dead.attempts == 2
    clock.advance(5000)
    assert client.dlq_requeue("q").requeued == 1
    again = lease_one(client, "q")
    assert (again.attempts, again.first_leased_at) == (1, clock())
