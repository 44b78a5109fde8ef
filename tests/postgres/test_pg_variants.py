"""The PostgreSQL statement variants turned off one at a time (``bench/pg_variants.py``'s
``disable``, which the ablation benchmark applies in every process of a side): with a variant
off, sqew goes the dialect-neutral way where the variant would run, and is still a correct
sqew; and the variant's statement is never sent (every statement the Client's backend runs
is seen through its ``trace`` hook), where with every variant on the same operations send it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import sqew
from sqew.backends import open_backend
from sqew.backends.paramstyle import pyformat
from sqew.backends.postgres import statements as sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (the repository's bench/)
from bench import pg_variants

pytestmark = pytest.mark.postgres

Sent = Callable[[list[str]], bool]
_BY_NAME = {*sql.ENQUEUE.values(), *sql.CLAIM.values(), *sql.ACK.values()}


def _any_of(*statements: str) -> Sent:
    """Whether any of ``statements`` was sent (taken now: before a variant is turned off)."""
    wanted = set(statements)
    return lambda sent: any(s in wanted for s in sent)


def _alone(sent: list[str]) -> bool:
    """Whether a by-name write went out as a transaction by itself (no ``BEGIN`` with it)."""
    return any(s in _BY_NAME and (i == 0 or sent[i - 1] != "BEGIN") for i, s in enumerate(sent))


SENDS: dict[str, Sent] = {
    "ENQUEUE": _any_of(*sql.ENQUEUE.values()),
    "CLAIM": _any_of(*sql.CLAIM.values()),
    "ACK": _any_of(*sql.ACK.values()),
    "FAST": _alone,
    "EXTEND": _any_of(pyformat(sql.EXTEND)),
}
"""How each variant shows in the statements sent."""


def test_every_variant_has_a_sign() -> None:
    assert set(SENDS) == set(pg_variants.VARIANTS)


def operations(url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A few real operations of an embedded Client on ``url``, their answers checked: plain,
    cached and keyed enqueues (one and a batch), polls of one and of ten, an extend of ten
    leases, acks of one and of ten. Returns the statements its backend sent."""
    sent: list[str] = []
    # The Client's own backend, opened with its diagnostics hook.
    monkeypatch.setattr("sqew.client.local.open_backend",
                        functools.partial(open_backend, trace=sent.append))
    with sqew.LocalClient(url) as client:
        client.create_queue("q")
        for n in range(2):  # the second on the settings the first found
            client.enqueue("q", {"n": n})
        client.enqueue_batch("q", [{"payload": {"n": n}} for n in range(2, 5)])
        first = client.enqueue("q", {"n": 5}, idempotency_key="k1")
        again = client.enqueue("q", {"n": 99}, idempotency_key="k1")
        assert (again.message_id, again.duplicate) == (first.message_id, True)
        keyed = client.enqueue_batch("q", [
            {"payload": {"n": 6}, "idempotency_key": "k2"},
            {"payload": {"n": 7}, "idempotency_key": "k3"},
            {"payload": {"n": 98}, "idempotency_key": "k1"},
        ])
        assert [r.duplicate for r in keyed] == [False, False, True]
        assert keyed[2].message_id == first.message_id
        (m,) = client.poll("q")
        assert m.payload == {"n": 0}
        assert client.ack("q", m.id, m.token).status == "acked"
        got = client.poll("q", batch=10)
        assert [g.payload["n"] for g in got] == list(range(1, 8))
        assert len({g.token for g in got}) == 7
        extended = client.extend_leases("q", [(g.id, g.token, 60_000) for g in got]
                                        + [(got[0].id, "f" * 32, 60_000)])
        assert [r.status for r in extended] == ["extended"] * 7 + ["lease_lost"]
        assert client.ack_batch("q", [(got[1].id, got[0].token)])[0].status == "lease_lost"
        acked = client.ack_batch("q", [(g.id, g.token) for g in got])
        assert [r.status for r in acked] == ["acked"] * 7
        stats = client.stats("q")
        assert (stats.ready, stats.leased, stats.enqueued_total, stats.acked_total) \
            == (0, 0, 8, 8)
    return sent


def test_with_every_variant_on_each_is_sent(pg_url: str, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    sent = operations(pg_url, monkeypatch)
    assert [v for v, sends in SENDS.items() if not sends(sent)] == []


@pytest.mark.parametrize("variant", list(pg_variants.VARIANTS))
def test_with_a_variant_off_sqew_is_correct_and_never_sends_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, variant: str,
) -> None:
    with pg_variants.disabled(variant):
        sent = operations(pg_url, monkeypatch)
    assert not SENDS[variant](sent)
    # (the others still run: one variant off at a time)
    assert [v for v, sends in SENDS.items() if v != variant and not sends(sent)] == []


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="no such variant"):
        pg_variants.disable("CLAIM.none")
