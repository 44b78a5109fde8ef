"""The figures of runs: a line per column, and the same as JSON."""

from __future__ import annotations

import json
from typing import Any

from chaos.checker import COLUMNS, LABELS, Summary

SHOWN = 20
"""Violations printed in full per run (all are counted)."""


def lines(summary: Summary, seconds: float, notes: list[str]) -> list[str]:
    """The human summary of one run: a line per column, then the violations."""
    counts = summary.counts()
    out = [f"== {summary.scenario} ({seconds:.0f} s): {'ok' if summary.ok else 'VIOLATIONS'}"]
    out += [f"  {LABELS.get(column, column):<28} {counts[column]}" for column in COLUMNS]
    out += [f"  note: {n}" for n in notes]
    out += [f"  {v.kind}: {v.detail}" for v in summary.violations[:SHOWN]]
    if len(summary.violations) > SHOWN:
        out.append(f"  … and {len(summary.violations) - SHOWN} more")
    return out


def as_json(summary: Summary, seconds: float, notes: list[str]) -> dict[str, Any]:
    """The JSON summary of one run."""
    return {"scenario": summary.scenario, "seconds": round(seconds, 1), **summary.counts(),
            "notes": notes, "violations": [f"{v.kind}: {v.detail}"
                                           for v in summary.violations]}


def dumps(results: list[dict[str, Any]]) -> str:
    """The JSON document of several runs."""
    return json.dumps({"runs": results}, indent=2)
