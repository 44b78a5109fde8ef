"""The soak (``scripts/chaos soak``, ``chaos/soak.py``) in a tiny form: it runs its load,
samples it, and writes the CSV, the JSON summary and the plots (docs/reliability.md, "Soak").
What the figures are is reported by the long runs, not asserted here; the flat verdict's
rule is tested on rows made by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from chaos import soak, soak_plot


@pytest.mark.chaos
def test_a_short_soak_writes_its_samples_and_plots(tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    soak.run(tmp_path / "run", 8 / 60, "sqlite", plots, sample_s=1.0, rate=5.0, clients=2)
    with (plots / "soak-sqlite.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 3
    assert all(float(r["server_rss_mb"]) > 0 and float(r["clients_rss_mb"]) > 0 for r in rows)
    assert all(float(r["db_mb"]) > 0 for r in rows)
    assert sum(int(r["enqueue_n"]) for r in rows) > 0
    assert sum(int(r["ack_n"]) for r in rows) > 0
    summary = json.loads((plots / "soak-sqlite.json").read_text())
    assert summary["samples"] == len(rows)
    assert {"server_rss_mb", "db_mb", "wal_mb", "enqueue_p99_ms"} <= set(summary["series"])
    for figure in soak_plot.FIGURES:
        png = plots / f"soak-sqlite-{figure}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _rows(values: list[float]) -> list[dict[str, float]]:
    return [{"t_s": i, "server_rss_mb": v} for i, v in enumerate(values)]


def test_a_series_is_flat_within_the_tolerance_or_the_floor() -> None:
    assert soak.verdicts(_rows([100.0] * 5 + [120.0] * 5))["server_rss_mb"]["flat"]
    assert not soak.verdicts(_rows([100.0] * 5 + [200.0] * 5))["server_rss_mb"]["flat"]
    # Small in absolute terms: flat whatever the ratio.
    assert soak.verdicts(_rows([1.0] * 5 + [5.0] * 5))["server_rss_mb"]["flat"]
    judged = soak.verdicts(_rows([10.0, 50.0, 50.0, 50.0, 90.0]))["server_rss_mb"]
    assert (judged["start"], judged["end"]) == (10.0, 90.0)  # the first and last fifths
