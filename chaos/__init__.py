"""sqew's fault-injection harness: workload processes journal every acknowledged operation,
faults are injected on purpose, and an oracle reconciles the journals with the database.

``python -m chaos SCENARIO [--minutes N] [--long]`` (or ``scripts/chaos``); what it checks and
the figures measured with it: docs/reliability.md. A development tool: not in the wheel.
"""

from __future__ import annotations
