"""Every scenario of the chaos harness in its short form: the fault really happened, the
workload was acknowledged, and the oracle found no violation (docs/reliability.md); where a
scenario stages late settles of lapsed leases (``pause-consumer``), sqew refused some with
``LeaseLost``, so the lease rules were at work."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import report
from chaos.__main__ import SHORT_S
from chaos.run import Run, execute
from chaos.scenarios import SCENARIOS

STAGES_LEASE_LOST = {"pause-consumer"}
"""Scenarios that make late settles of leases another consumer has taken, whatever the load
(elsewhere they happen by chance: counted, not required)."""


@pytest.mark.slow
@pytest.mark.chaos
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_short_form_injects_faults_and_breaks_no_promise(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    run = Run(tmp_path / name, SHORT_S, seed=7, server_workers=scenario.server_workers)
    summary = execute(run, name, scenario.inject)
    shown = "\n".join(report.lines(summary, SHORT_S, run.notes))
    counts = summary.counts()
    assert counts["faults"] > 0, shown
    assert counts["operations"] > 0, shown
    assert summary.ok, shown
    if name in STAGES_LEASE_LOST:
        assert counts["lease_lost"] > 0, shown
