"""Ablation of sqew's PostgreSQL statement variants: what each buys, measured.

``python -m bench.pg_variants [--quick] [--json FILE] [--no-http] [VARIANT ...]`` (or
``scripts/bench pg-variants …``). Every variant of ``sqew/backends/postgres/statements.py``
that is there for speed (its dialect-neutral way, ``sqew.backends.sql``, does the same work)
stays only if it buys ≥ 10 % on a case of ``scripts/bench postgres`` it serves. This runs
those cases (``bench/postgres.py``'s machinery: its server, templates, interleaved chunks,
consumer processes, medians) with the sides ``sqew`` and ``sqew-without-<VARIANT>`` for each
variant named (all by default): every process of such a side, the enqueuer, the consumers
and a ``sqew serve``, calls ``disable(VARIANT)`` before it opens its Client. Each variant is
turned off alone; the others stay on.

The report: per variant and case, sqew's rate with the variant and without it, the gain
(with / without - 1), and the verdict: KEEP where the gain is ≥ 10 % on at least one case,
else DROP. Exit status 0 (an ablation has no target; 1 if sqew cannot run here).

The contract's own statements (``REAP_DEDUP``, ``NOTIFY``, ``LOCK_*``) are not variants: a
neutral statement would not do their work, so they are not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import postgres, postgres_http
from bench.postgres_sides import SQEW, WITHOUT

KEEP_GAIN = 0.10
"""A variant stays if it buys at least this much on one of its cases."""
_HTTP_ENQUEUE, _HTTP_POLL = postgres_http.CASES
_POLL_ACKS = tuple(postgres.poll_ack(n, b) for n in postgres.CONSUMERS
                   for b in postgres.POLL_BATCHES)


@dataclass(frozen=True)
class Variant:
    """A variant: the cases it serves, and what runs when it is off."""

    cases: tuple[str, ...]
    off: str


VARIANTS: dict[str, Variant] = {
    "ENQUEUE": Variant((postgres.SINGLE, postgres.BATCHED, _HTTP_ENQUEUE),
                       "the neutral enqueue by name: reserve, then insert"),
    "CLAIM": Variant((*_POLL_ACKS, _HTTP_POLL),
                     "the neutral claim by name: read the queue, then claim"),
    "ACK": Variant((*_POLL_ACKS, _HTTP_POLL),
                   "the neutral ack by name: count, then a DELETE per item"),
    "FAST": Variant((postgres.SINGLE, postgres.BATCHED, *_POLL_ACKS),
                    "every write in a transaction (BEGIN … COMMIT)"),
    "EXTEND": Variant((postgres.POLL_EXTEND_ACK,), "SqlTx.extend (an UPDATE per lease)"),
}
"""The variants for speed, by their names in ``statements.py`` (``FAST``: ``PostgresFast``, the
by-name writes sent alone, without ``BEGIN`` and ``COMMIT``)."""


# --- turning a variant off -----------------------------------------------------------------------
Patch = tuple[Any, Any, Any]
"""(an object or a dict, an attribute name or a key, the value it takes)."""


def _missed(*args: Any, **kwargs: Any) -> Any:
    """A by-name write that never applies: the caller goes the neutral way."""
    from sqew.backends.base import MISSED

    return MISSED


def _no_fast_paths(self: Any) -> None:
    """``Backend.fast_paths`` of a backend without any: every write in a transaction."""
    return None


def patches(variant: str) -> list[Patch]:
    """What turning ``variant`` off changes (``ValueError`` for a name not in
    ``VARIANTS``)."""
    from sqew.backends.postgres import by_name
    from sqew.backends.postgres.backend import PostgresBackend
    from sqew.backends.postgres.tx import PostgresTx
    from sqew.backends.sql import SqlTx

    # The by-name writes answer MISSED before sending anything: the fast path (PostgresFast)
    # and the transaction's (PostgresTx) go on the neutral way, as where the cache is stale.
    made: dict[str, Callable[[], list[Patch]]] = {
        "ENQUEUE": lambda: [(by_name, "enqueue", _missed)],
        "CLAIM": lambda: [(by_name, "claim", _missed)],
        "ACK": lambda: [(by_name, "ack", _missed)],
        "FAST": lambda: [(PostgresBackend, "fast_paths", _no_fast_paths)],
        "EXTEND": lambda: [(PostgresTx, "extend", SqlTx.extend)],
    }
    if variant not in made:
        raise ValueError(f"no such variant: {variant!r} (variants: {', '.join(VARIANTS)})")
    return made[variant]()


def _swap(target: Any, key: Any, value: Any) -> Any:
    """Set ``target``'s ``key`` (an item of a dict, else an attribute) to ``value``; the
    value it had."""
    if isinstance(target, dict):
        old, target[key] = target[key], value
        return old
    old = getattr(target, key)
    setattr(target, key, value)
    return old


def disable(variant: str) -> None:
    """Turn ``variant`` off in this process, for good: sqew then goes the neutral way where
    the variant would have run. Call it before a Client or server is opened."""
    for target, key, value in patches(variant):
        _swap(target, key, value)


@contextmanager
def disabled(variant: str) -> Iterator[None]:
    """``variant`` off inside the block, back on after it (tests)."""
    undo: list[Patch] = []
    try:
        for target, key, value in patches(variant):
            undo.append((target, key, _swap(target, key, value)))
        yield
    finally:
        for target, key, value in reversed(undo):
            _swap(target, key, value)


# --- measuring -----------------------------------------------------------------------------------
def sides_for(variants: list[str], http: bool) -> postgres.SidesFor:
    """``bench/postgres.py``'s sides of each case: ``sqew`` and one ``sqew-without-X`` per
    variant X of ``variants`` that serves it (none where no variant does; over HTTP only with
    ``http``)."""
    def sides(case: str) -> list[str]:
        if case in postgres_http.CASES and not http:
            return []
        without = [WITHOUT + v for v in variants if case in VARIANTS[v].cases]
        return [SQEW, *without] if without else []

    return sides


def verdicts(medians: dict[str, dict[str, float]], variants: list[str]) -> list[dict[str, Any]]:
    """Per variant: each measured case's rates with and without it and the gain; the best
    gain and the verdict."""
    out = []
    for v in variants:
        without = WITHOUT + v
        cases: list[dict[str, Any]] = [
            {"case": case, "with": by[SQEW], "without": by[without],
             "gain": by[SQEW] / by[without] - 1}
            for case, by in medians.items() if without in by and SQEW in by]
        best = max((c["gain"] for c in cases), default=None)
        out.append({"variant": v, "off": VARIANTS[v].off, "cases": cases, "best_gain": best,
                    "verdict": "n/a" if best is None else
                    "KEEP" if best >= KEEP_GAIN else "DROP"})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of ``verdicts``: a line per variant and case, the verdict on a
    variant's first."""
    lines = ["| variant | case | sqew (msg/s) | without it (msg/s) | gain | verdict |",
             "|---|---|---:|---:|---:|---|"]
    for row in rows:
        for i, c in enumerate(row["cases"] or [{"case": "not measured"}]):
            rates = (f"{c['with']:,.0f} | {c['without']:,.0f} | {c['gain']:+.0%}"
                     if "gain" in c else "| |")
            lines.append(f"| {row['variant'] if i == 0 else ''} | {c['case']} | {rates} | "
                         f"{row['verdict'] if i == 0 else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.pg_variants [--quick] [--json FILE] [--no-http] [VARIANT ...]``."""
    parser = argparse.ArgumentParser(prog="scripts/bench pg-variants",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", metavar="VARIANT",
                        help=f"the variants to measure (default: all: {', '.join(VARIANTS)})")
    parser.add_argument("--quick", action="store_true", help="one short round")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--no-http", action="store_true",
                        help="only the Client's cases (no sqew serve, no wrk)")
    args, other = parser.parse_known_args(argv)
    if other:
        print(f"pg-variants: ignoring options of other suites: {' '.join(other)}", flush=True)
    variants = args.variants or list(VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"no such variant: {', '.join(unknown)} (variants: {', '.join(VARIANTS)})")
    load = os.getloadavg()[0]
    result = postgres.run(args.quick, out=lambda s: print(s, flush=True),
                          sides_for=sides_for(variants, not args.no_http), replicas=False)
    rows = verdicts(result["medians"], variants)
    print()
    print(postgres.header(result, load))
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "variants": rows}, indent=2))
    if result["missing"]:
        print(f"\nnothing was measured: {result['missing']}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
