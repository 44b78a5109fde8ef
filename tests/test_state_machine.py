"""Property test: random enqueue/poll/ack/nack/extend/requeue/compact/clock sequences against a
small reference model of docs/rest.md's semantics, run once per target of ``tests/targets.py``
(``local-sqlite``, ``http-sqlite``, …): the same machine drives the target's client, each
example on a fresh store.

The model knows, for every message ever enqueued, where it is (the queue, its DLQ, acked, or
expired), its attempts, its current lease and token, and when it becomes available. After every
step the real store must agree with it message by message and in its stats. Polls must return
exactly the messages the model says are ready, in the documented order. Randomness (backoff
jitter) is checked against its bounds and then adopted by the model; the service's jitter is
seeded from the example, so hypothesis can replay and shrink a failure.

The service is built with ``reap_interval_ms=0`` (and a server's reaper timer is off, see
``targets.py``) so every poll reaps expired messages first, which makes "expired" a
deterministic state for the model.

The budget (examples x steps) is set per target in ``BUDGETS``: an example over HTTP costs a
server start and a round trip per call, and the invariants read every message after each step.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from targets import TARGETS, TargetSpec

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

Q, DLQ = "q", "q.dlq"
VIS = 5000
MAX_ATTEMPTS = 3
BASE, CAP = 100, 400
RETENTION = 600_000
DLQ_RETENTION = 345_600_000  # a DLQ is created with the default settings
DEDUP = 3000
KEYS = st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3"]))
TTLS = st.sampled_from([None, None, 1000, 3000, 8000])
DELAYS = st.sampled_from([0, 0, 0, 500, 2000])


@dataclass
class Msg:
    """The model of one message."""

    id: int
    payload: Any
    priority: int
    available_at: int
    expires_at: int
    loc: str = "q"  # "q" | "dlq" | "acked" | "expired"
    attempts: int = 0
    token: str | None = None
    lease_until: int | None = None
    last_error: str | None = None
    tokens: list[str] = field(default_factory=list)


@dataclass
class Totals:
    """The queue's counters as the model expects them."""

    enqueued: int = 0
    acked: int = 0
    nacked: int = 0
    dead: int = 0
    expired: int = 0


class QueueMachine(RuleBasedStateMachine):
    """Drives the client of one target, on a fresh store, against the model."""

    def __init__(self, spec: TargetSpec) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="sqew-sm-"))
        self.clock = ManualClock()
        try:
            self.target = spec.open(self.dir, self.clock, reap_interval_ms=0)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.client = self.target.client
        self.msgs: dict[int, Msg] = {}
        self.dedup: dict[str, tuple[int, int]] = {}  # key -> (message id, window end)
        self.totals = Totals()
        self.seen_tokens: set[str] = set()
        self.probes = 0  # the invariants' reads by id so far: which message is next

    @initialize(seed=st.integers(0, 2**32 - 1))
    def create(self, seed: int) -> None:
        self.target.seed_jitter(seed)
        self.client.create_queue(
            Q, visibility_ms=VIS, max_attempts=MAX_ATTEMPTS, backoff_base_ms=BASE,
            backoff_max_ms=CAP, retention_ms=RETENTION, dedup_window_ms=DEDUP,
        )

    def teardown(self) -> None:
        directory = self.dir
        self.target.close_soon(then=lambda: shutil.rmtree(directory, ignore_errors=True))

    # --- helpers --------------------------------------------------------------------------------
    @property
    def now(self) -> int:
        return self.clock()

    def pick(self, index: int, *, leased_once: bool = False) -> Msg:
        pool = [m for m in self.msgs.values() if m.tokens or not leased_once]
        return pool[index % len(pool)]

    def token_for(self, m: Msg, stale: int) -> str:
        """The current token, or (stale > 0) an earlier one when there is one."""
        if stale and len(m.tokens) > 1:
            return m.tokens[stale % (len(m.tokens) - 1)]
        return m.tokens[-1]

    def holds(self, m: Msg, token: str) -> bool:
        return m.loc == "q" and m.token is not None and m.token == token

    def miss(self, m: Msg) -> str:
        return "lease_lost" if m.loc == "q" else "not_found"

    def expect_enqueue(self, items: list[dict[str, Any]], got: list[sqew.EnqueueResult]) -> None:
        assert len(got) == len(items)
        top = max(self.msgs, default=0)
        for item, r in zip(items, got, strict=True):
            key = item.get("idempotency_key")
            if key is not None and key in self.dedup and self.dedup[key][1] > self.now:
                assert (r.message_id, r.duplicate) == (self.dedup[key][0], True), (item, r)
                continue
            assert r.duplicate is False and r.message_id > top, (item, r)
            top = r.message_id
            ttl = item.get("ttl_ms") or RETENTION
            self.msgs[r.message_id] = Msg(
                r.message_id, item["payload"], item.get("priority", 0),
                self.now + item.get("delay_ms", 0), self.now + ttl,
            )
            self.totals.enqueued += 1
            if key is not None:
                self.dedup[key] = (r.message_id, self.now + DEDUP)

    def reap(self) -> None:
        """What a poll does first (reap_interval_ms=0): expired messages and tombstones go."""
        for m in self.msgs.values():
            if m.loc in ("q", "dlq") and m.expires_at <= self.now:
                if m.loc == "q":
                    self.totals.expired += 1
                m.loc, m.token, m.lease_until = "expired", None, None
        self.dedup = {k: v for k, v in self.dedup.items() if v[1] > self.now}

    def read(self) -> None:
        """What a read does first (the reaper, due at every call with reap_interval_ms=0):
        expired messages and tombstones go, last leases that ended are dead-lettered."""
        self.reap()
        for m in self.msgs.values():
            if (m.loc == "q" and m.lease_until is not None and m.lease_until <= self.now
                    and m.attempts >= MAX_ATTEMPTS):
                before = "" if m.last_error is None else f"; before: {m.last_error}"
                self.dead_letter(m, "lease expired" + before)

    def sweep(self) -> None:
        """Expired leases: dead-letter at max_attempts, else ready again from the lease's end."""
        for m in self.msgs.values():
            if m.loc == "q" and m.lease_until is not None and m.lease_until <= self.now:
                if m.attempts >= MAX_ATTEMPTS:
                    before = "" if m.last_error is None else f"; before: {m.last_error}"
                    self.dead_letter(m, "lease expired" + before)
                else:  # the token stays current: nobody leased it since
                    m.available_at, m.lease_until = m.lease_until, None

    def dead_letter(self, m: Msg, error: str | None = None) -> None:
        m.loc, m.token, m.lease_until = "dlq", None, None
        m.available_at, m.expires_at = self.now, self.now + DLQ_RETENTION
        m.last_error = error if error is not None else m.last_error
        self.totals.dead += 1

    # --- rules ----------------------------------------------------------------------------------
    @rule(payload=st.integers(), priority=st.integers(-2, 2), delay=DELAYS, ttl=TTLS, key=KEYS)
    def enqueue(self, payload: int, priority: int, delay: int, ttl: int | None,
                key: str | None) -> None:
        item: dict[str, Any] = {"payload": payload, "priority": priority, "delay_ms": delay}
        if ttl is not None:
            item["ttl_ms"] = ttl
        if key is not None:
            item["idempotency_key"] = key
        fields = {k: v for k, v in item.items() if k != "payload"}
        if delay >= (ttl or RETENTION):  # it would expire before it could be delivered
            with pytest.raises(errors.ValidationError):
                self.client.enqueue(Q, payload, **fields)
            return
        self.expect_enqueue([item], [self.client.enqueue(Q, payload, **fields)])

    @rule(items=st.lists(
        st.fixed_dictionaries({"payload": st.text(max_size=5), "priority": st.integers(-2, 2)},
                              optional={"idempotency_key": st.sampled_from(["k1", "k2", "k3"]),
                                        "ttl_ms": TTLS}),
        min_size=1, max_size=4,
    ))
    def enqueue_batch(self, items: list[dict[str, Any]]) -> None:
        items = [{k: v for k, v in i.items() if v is not None} for i in items]
        self.expect_enqueue(items, self.client.enqueue_batch(Q, items))

    @rule(batch=st.integers(1, 5), visibility=st.sampled_from([None, None, 2000]))
    def poll(self, batch: int, visibility: int | None) -> None:
        got = self.client.poll(Q, batch=batch, visibility_ms=visibility)
        self.reap()
        self.sweep()
        ready = [m for m in self.msgs.values() if m.loc == "q" and m.lease_until is None
                 and m.available_at <= self.now < m.expires_at]
        ready.sort(key=lambda m: (-m.priority, m.available_at, m.id))
        expected = ready[:batch]
        assert [g.id for g in got] == [m.id for m in expected]
        vis = VIS if visibility is None else visibility
        for g, m in zip(got, expected, strict=True):
            m.attempts += 1
            assert (g.attempts, g.payload, g.priority) == (m.attempts, m.payload, m.priority)
            assert g.lease_expires_at == self.now + vis
            assert g.token not in self.seen_tokens, "a token was handed out twice"
            self.seen_tokens.add(g.token)
            m.token, m.lease_until = g.token, self.now + vis
            m.tokens.append(g.token)

    @precondition(lambda self: any(m.tokens for m in self.msgs.values()))
    @rule(index=st.integers(0, 1000), stale=st.integers(0, 3), batch=st.booleans())
    def ack(self, index: int, stale: int, batch: bool) -> None:
        m = self.pick(index, leased_once=True)
        token = self.token_for(m, stale)
        expected = "acked" if self.holds(m, token) else self.miss(m)
        if batch:
            (result,) = self.client.ack_batch(Q, [(m.id, token)])
            assert (result.id, result.status) == (m.id, expected)
        elif expected == "acked":
            assert self.client.ack(Q, m.id, token).status == "acked"
        else:
            error = errors.LeaseLost if expected == "lease_lost" else errors.MessageNotFound
            try:
                self.client.ack(Q, m.id, token)
            except error:
                pass
            else:
                raise AssertionError(f"ack of message {m.id} should fail with {expected}")
        if expected == "acked":
            m.loc, m.token, m.lease_until = "acked", None, None
            self.totals.acked += 1

    @precondition(lambda self: any(m.loc == "q" and m.token for m in self.msgs.values()))
    @rule(error=st.sampled_from([None, "e3"]))
    def nack_every_held_now(self, error: str | None) -> None:
        """Every message held (by its current token) nacked to be ready at once: with polls in
        between, messages reach ``max_attempts`` and the DLQ within a few steps."""
        held = [m for m in self.msgs.values() if m.loc == "q" and m.token is not None]
        items = [{"id": m.id, "token": m.token, "delay_ms": 0, "error": error} for m in held]
        results = self.client.nack_batch(Q, items)
        assert [r.id for r in results] == [m.id for m in held]
        for m, r in zip(held, results, strict=True):
            self.totals.nacked += 1
            if m.attempts >= MAX_ATTEMPTS:
                assert r.status == "dead_lettered", (m, r)
                self.dead_letter(m, error)
                continue
            assert r.status == "requeued", (m, r)
            m.token, m.lease_until, m.available_at = None, None, self.now
            m.last_error = error if error is not None else m.last_error

    @precondition(lambda self: any(m.tokens for m in self.msgs.values()))
    @rule(index=st.integers(0, 1000), stale=st.integers(0, 3),
          delay=st.sampled_from([None, None, 0, 700]), error=st.sampled_from([None, "e1", "e2"]))
    def nack(self, index: int, stale: int, delay: int | None, error: str | None) -> None:
        m = self.pick(index, leased_once=True)
        token = self.token_for(m, stale)
        item: dict[str, Any] = {"id": m.id, "token": token, "delay_ms": delay, "error": error}
        (result,) = self.client.nack_batch(Q, [item])
        if not self.holds(m, token):
            assert (result.id, result.status) == (m.id, self.miss(m))
            return
        self.totals.nacked += 1
        if m.attempts >= MAX_ATTEMPTS:
            assert result.status == "dead_lettered", (m, result)
            self.dead_letter(m, error)
            return
        assert result.status == "requeued", (m, result)
        m.token, m.lease_until = None, None
        m.last_error = error if error is not None else m.last_error
        if delay is not None:
            m.available_at = self.now + delay
        else:
            backoff = min(CAP, BASE * 2 ** (m.attempts - 1))
            self.read()
            actual = self.client.get_message(Q, m.id).available_at
            assert self.now + backoff <= actual <= self.now + backoff * 1.1, (m, actual)
            m.available_at = actual

    @precondition(lambda self: any(m.tokens for m in self.msgs.values()))
    @rule(index=st.integers(0, 1000), stale=st.integers(0, 3),
          ms=st.sampled_from([0, 1000, 8000]))
    def extend_lease(self, index: int, stale: int, ms: int) -> None:
        m = self.pick(index, leased_once=True)
        token = self.token_for(m, stale)
        if self.holds(m, token):
            result = self.client.extend_lease(Q, m.id, token, ms)
            assert (result.id, result.lease_expires_at) == (m.id, self.now + ms)
            m.lease_until = self.now + ms
            return
        error = errors.LeaseLost if self.miss(m) == "lease_lost" else errors.MessageNotFound
        try:
            self.client.extend_lease(Q, m.id, token, ms)
        except error:
            return
        raise AssertionError(f"extend of message {m.id} should fail with {self.miss(m)}")

    @rule(ms=st.sampled_from([1, 100, 499, 500, 1000, 2000, 3000, 5000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def requeue_dlq(self) -> None:
        dead = [m for m in self.msgs.values() if m.loc == "dlq"]
        assert self.client.dlq_requeue(Q).requeued == len(dead)
        for m in dead:
            m.loc, m.attempts = "q", 0
            m.available_at, m.expires_at = self.now, self.now + RETENTION

    @rule()
    def compact(self) -> None:
        gone = [m for m in self.msgs.values() if m.loc == "q" and m.expires_at <= self.now]
        tombstones = [k for k, v in self.dedup.items() if v[1] <= self.now]
        assert self.client.compact(Q) == len(gone) + len(tombstones)
        for m in gone:
            m.loc, m.token, m.lease_until = "expired", None, None
        self.totals.expired += len(gone)
        for k in tombstones:
            del self.dedup[k]

    # --- invariants -----------------------------------------------------------------------------
    @invariant()
    def every_message_is_exactly_where_the_model_says(self) -> None:
        # Every stored message, read by an export (scan pages of 1,000) of the queue and of
        # its DLQ: a few round trips a step, where reading each message by id would cost one
        # per message. ``get_message`` is checked on one message a step, in turn over all
        # of them (whatever became of it): its home answers with it, the other says
        # MessageNotFound; an acked or expired one is in neither.
        self.read()
        for loc, source in (("q", "queue"), ("dlq", "dlq")):
            expected = {m.id: m for m in self.msgs.values() if m.loc == loc}
            stored = {m.id: m for m in self.client.export(Q, source=source)}
            assert sorted(stored) == sorted(expected), (loc, sorted(stored), sorted(expected))
            for msg_id, got in stored.items():
                self.assert_stored(expected[msg_id], got)
        if not self.msgs:
            return
        self.probes += 1
        ids = sorted(self.msgs)
        m = self.msgs[ids[self.probes % len(ids)]]
        for loc, name in (("q", Q), ("dlq", DLQ)):
            if m.loc == loc:
                self.assert_stored(m, self.client.get_message(name, m.id))
                continue
            try:
                self.client.get_message(name, m.id)
            except errors.MessageNotFound:
                continue
            raise AssertionError(f"message {m.id} ({m.loc}) found in {name}")

    @staticmethod
    def assert_stored(m: Msg, got: sqew.Message) -> None:
        """The stored message ``got`` is the model's ``m``."""
        assert (got.payload, got.priority, got.attempts, got.last_error) == (
            m.payload, m.priority, m.attempts, m.last_error,
        ), (m, got)
        assert (got.available_at, got.expires_at) == (m.available_at, m.expires_at), (m, got)

    @invariant()
    def stats_agree(self) -> None:
        self.read()
        now = self.now
        live = [m for m in self.msgs.values() if m.loc == "q"]
        expired = sum(m.expires_at <= now for m in live)
        leased = sum(m.lease_until is not None and m.lease_until > now < m.expires_at
                     for m in live)
        delayed = sum(m.lease_until is None and m.available_at > now < m.expires_at
                      for m in live)
        s = self.client.stats(Q)
        t = self.totals
        assert (s.ready, s.delayed, s.leased) == (len(live) - expired - leased - delayed,
                                                  delayed, leased)
        assert s.dlq == sum(m.loc == "dlq" for m in self.msgs.values())
        assert (s.enqueued_total, s.acked_total, s.nacked_total, s.dead_lettered_total,
                s.expired_total) == (t.enqueued, t.acked, t.nacked, t.dead, t.expired)

    @invariant()
    def at_most_one_live_lease_per_message(self) -> None:
        # by the model: a message has one current token; tokens are never reissued (poll)
        for m in self.msgs.values():
            assert m.token is None or m.token == m.tokens[-1]
            assert m.loc != "q" or m.attempts <= MAX_ATTEMPTS


@dataclass(frozen=True)
class Budget:
    """How much of the machine to run on a target: examples, and steps per example."""

    max_examples: int
    steps: int


BUDGETS: dict[str, Budget] = {
    "local-sqlite": Budget(max_examples=60, steps=40),
    "http-sqlite": Budget(max_examples=20, steps=40),
    # Each example clones a database on the test server.
    "local-postgres": Budget(max_examples=20, steps=40),
    "http-postgres": Budget(max_examples=10, steps=40),
    # The AsyncClient shares the sync clients' calls; its machine checks the loop's side.
    "async-local-sqlite": Budget(max_examples=15, steps=40),
    "async-http-sqlite": Budget(max_examples=10, steps=40),
    "async-local-postgres": Budget(max_examples=5, steps=40),
    # Its client is async-http-sqlite's and its server http-postgres's: a sample suffices.
    "async-http-postgres": Budget(max_examples=5, steps=40),
}
"""Per target id; a target not listed gets ``DEFAULT_BUDGET`` until its run is timed."""
DEFAULT_BUDGET = Budget(max_examples=20, steps=40)


# A failure is shrunk for up to 5 minutes (hypothesis's own limit) after it is found: the
# timeout leaves room for that, so the report is the minimal example rather than a timeout.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("spec", [spec.param for spec in TARGETS])
def test_queue_machine(spec: TargetSpec) -> None:
    budget = BUDGETS.get(spec.id, DEFAULT_BUDGET)
    run_state_machine_as_test(partial(QueueMachine, spec), settings=settings(
        max_examples=budget.max_examples,
        stateful_step_count=budget.steps,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    ))
