"""``sqew stats``: depths and counters of one queue."""

from __future__ import annotations

from typing import Annotated

import typer

from sqew.cli import output
from sqew.cli.state import current


def stats(
    ctx: typer.Context,
    queue: Annotated[str, typer.Option("--queue", "-q", metavar="NAME", help="The queue.")],
) -> None:
    """Show a queue's depths (ready, delayed, leased, dlq) and lifetime counters.

    Example:

        sqew stats --queue jobs
    """
    state = current(ctx)
    s = state.client.stats(queue)
    output.emit(state, s, output.stats_detail(s))
