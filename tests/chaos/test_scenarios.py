"""Every scenario of the chaos harness in its short form: the fault really happened, the
workload was acknowledged, and the oracle found no violation (docs/reliability.md); where a
scenario stages late settles of lapsed leases (``pause-consumer``), sqew refused some with
``LeaseLost``, so the lease rules were at work; where the harness probes sqew's answers itself
(``pg-outage``), none was one sqew must not give.

The PostgreSQL scenarios (marked ``postgres``) share one server of this module's own (not
the suite's: they restart it), each on a fresh database; skipped where PostgreSQL cannot run,
failed instead under ``SQEW_REQUIRE_POSTGRES`` (``tests/pg_support.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_support
import pytest

from chaos import faults_pg, pg, report
from chaos.__main__ import SHORT_S
from chaos.scenarios import SCENARIOS

STAGES_LEASE_LOST = {"pause-consumer"}
"""Scenarios that make late settles of leases another consumer has taken, whatever the load
(elsewhere they happen by chance: counted, not required)."""


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.postgres] if SCENARIOS[name].backend == "postgres" else []


@pytest.fixture(scope="module")
def pg_server() -> Iterator[Any]:
    """A PostgreSQL server (durable settings) for this module's PostgreSQL scenarios."""
    reason = pg_support.backend_missing()
    if reason:
        pytest.skip(reason)
    pg_support.server_or_skip()
    server = pg.start_server()
    try:
        yield server
    finally:
        server.destroy()


@pytest.mark.slow
@pytest.mark.chaos
@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in SCENARIOS])
def test_the_short_form_injects_faults_and_breaks_no_promise(
        name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    scenario = SCENARIOS[name]
    if scenario.unavailable is not None and (reason := scenario.unavailable()) is not None:
        pytest.skip(reason)
    server = request.getfixturevalue("pg_server") if scenario.backend == "postgres" else None
    run, summary = scenario.run(tmp_path / name, SHORT_S, seed=7, pg_server=server)
    shown = "\n".join(report.lines(summary, SHORT_S, run.notes))
    counts = summary.counts()
    assert counts["faults"] > 0, shown
    assert counts["operations"] > 0, shown
    assert summary.ok, shown
    assert not faults_pg.wrong_answers(run.notes), shown  # (the probes of pg-outage)
    if name in STAGES_LEASE_LOST:
        assert counts["lease_lost"] > 0, shown
