"""The lease rules, checked on journals alone: one holder at a time, and a settled lease is
settled once.

A lease is known from the poll that returned it (``Held``). The process that polled it held
it *certainly* from the moment its poll's answer was read (the lease was committed before)
until the earlier of the lease's ``lease_expires_at`` (as the server said it) and the moment
the process sent anything that may have ended or shortened the lease (an ack, a nack or an
extend, whatever its outcome). A successful extend starts a new certain interval when its
answer was read, until the new ``lease_expires_at``.

Violations reported here are definite, whatever the timing of the processes:

- ``held-by-two``: another process's poll of the same message was sent and answered entirely
  inside a certain interval of a lease it did not get (less ``SLACK_S`` at the end: the
  server's times are whole milliseconds);
- ``stale-settle``: an ack, nack or extend with a lease's token succeeded although a newer
  lease of the message (a higher ``attempts``) had been answered to a poll before it was sent;
- ``same-attempt``: two leases of one message with the same ``attempts`` (every lease adds
  one), whatever their times;
- ``acked-twice``: two acks of one message succeeded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos.journal import OK, Record

SLACK_S = 0.02
"""Taken off the end of a certain interval: ``lease_expires_at`` is a whole millisecond of
the server's clock, read inside its transaction."""

SETTLES = ("ack", "nack", "extend", "ack-intent", "nack-intent")


@dataclass
class Held:
    """One lease of one message, as the process that polled it saw it."""

    process: str
    queue: str
    id: int
    token: str
    attempts: int
    poll_t0: float
    poll_t1: float
    certain: list[tuple[float, float]] = field(default_factory=list)

    def cut(self, at: float) -> None:
        """End the open certain interval at ``at`` (a call that may end the lease was sent)."""
        if self.certain:
            start, end = self.certain[-1]
            self.certain[-1] = (start, min(end, at))


@dataclass(frozen=True)
class Violation:
    """A broken promise: its kind and the journals' evidence."""

    kind: str
    detail: str


def leases_of(journals: dict[str, list[Record]]) -> list[Held]:
    """Every lease the journals show, with the intervals its holder certainly held it."""
    out: list[Held] = []
    for process, records in journals.items():
        open_leases: dict[tuple[str, int, str], Held] = {}
        for r in records:
            op = r.get("op")
            if op == "poll":
                for m in r["messages"]:
                    held = Held(process, r["queue"], m["id"], m["token"], m["attempts"],
                                r["t0"], r["t1"], [(r["t1"], m["lease_expires_at"] / 1000)])
                    open_leases[(r["queue"], m["id"], m["token"])] = held
                    out.append(held)
            elif op in SETTLES:
                held_now = open_leases.get((r["queue"], r["id"], r["token"]))
                if held_now is None:
                    continue
                held_now.cut(r["t0"])
                if op == "extend" and r.get("outcome") == OK:
                    held_now.certain.append((r["t1"], r["lease_expires_at"] / 1000))
    return out


def check(journals: dict[str, list[Record]]) -> list[Violation]:
    """Every definite violation of the lease rules in ``journals``."""
    helds = leases_of(journals)
    by_message: dict[tuple[str, int], list[Held]] = defaultdict(list)
    for h in helds:
        by_message[(h.queue, h.id)].append(h)
    found: list[Violation] = []
    for group in by_message.values():
        found += _overlaps(group)
        found += _same_attempts(group)
    found += _stale_settles(journals, by_message)
    found += _acked_twice(journals)
    return found


def _overlaps(group: list[Held]) -> Iterable[Violation]:
    for a in group:
        for b in group:
            if a.token == b.token:
                continue
            for start, end in a.certain:
                if b.poll_t0 >= start and b.poll_t1 <= end - SLACK_S:
                    yield Violation("held-by-two", (
                        f"message {a.queue}/{a.id}: {b.process} polled it (token {b.token}, "
                        f"sent {b.poll_t0:.3f}, answered {b.poll_t1:.3f}) while {a.process} "
                        f"held it (token {a.token}) from {start:.3f} to {end:.3f}"))
                    break


def _same_attempts(group: list[Held]) -> Iterable[Violation]:
    seen: dict[int, Held] = {}
    for h in sorted(group, key=lambda h: h.poll_t0):
        first = seen.setdefault(h.attempts, h)
        if first.token != h.token:
            yield Violation("same-attempt", (
                f"message {h.queue}/{h.id}: attempt {h.attempts} leased twice, to "
                f"{first.process} (token {first.token}) and {h.process} (token {h.token})"))


def _stale_settles(journals: dict[str, list[Record]],
                   by_message: dict[tuple[str, int], list[Held]]) -> Iterable[Violation]:
    for process, records in journals.items():
        for r in records:
            if r.get("op") not in ("ack", "nack", "extend") or r.get("outcome") != OK:
                continue
            group = by_message.get((r["queue"], r["id"]), [])
            mine = [h for h in group if h.token == r["token"]]
            if not mine:
                continue
            newer = [h for h in group
                     if h.attempts > mine[0].attempts and h.poll_t1 < r["t0"]]
            if newer:
                n = newer[0]
                yield Violation("stale-settle", (
                    f"message {r['queue']}/{r['id']}: {process}'s {r['op']} (token "
                    f"{r['token']}, attempt {mine[0].attempts}, sent {r['t0']:.3f}) succeeded "
                    f"after {n.process} got attempt {n.attempts} (token {n.token}, answered "
                    f"{n.poll_t1:.3f})"))


def _acked_twice(journals: dict[str, list[Record]]) -> Iterable[Violation]:
    acks: dict[tuple[str, int], list[str]] = defaultdict(list)
    for process, records in journals.items():
        for r in records:
            if r.get("op") == "ack" and r.get("outcome") == OK:
                acks[(r["queue"], r["id"])].append(f"{process} (token {r['token']})")
    for (queue, msg_id), who in acks.items():
        if len(who) > 1:
            yield Violation("acked-twice", f"message {queue}/{msg_id} acked by {', '.join(who)}")
