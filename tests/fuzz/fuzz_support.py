"""What the fuzz tests share (docs/reliability.md, "Fuzzing"): their hypothesis settings.

Each test is bounded by a number of examples that keeps it to seconds in the suite;
``SQEW_FUZZ_EXAMPLES`` (what ``./scripts/chaos fuzz`` sets) runs that many of each instead,
with hypothesis's random search rather than the suite's repeatable one.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LONG = int(os.environ.get("SQEW_FUZZ_EXAMPLES", "0"))


def fuzz_settings(examples: int) -> settings:
    """``examples`` examples in the suite (derandomized: a run is repeatable), or
    ``SQEW_FUZZ_EXAMPLES`` of them, randomized, when that is set."""
    return settings(
        max_examples=LONG or examples,
        derandomize=not LONG,
        deadline=None,  # a command opens a database: its time is the machine's
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                               HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def run_cli(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    """``sqew argv`` in this process, as ``sqew.cli.main`` runs it without exiting (the
    process would start too slowly for hundreds of examples): its status, stdout, stderr."""
    import importlib
    import io
    import sys

    cli_app = importlib.import_module("sqew.cli.app")  # the module; sqew.cli.app is the app
    out, err = io.BytesIO(), io.BytesIO()
    streams = (io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
               io.TextIOWrapper(out, encoding="utf-8", errors="replace", write_through=True),
               io.TextIOWrapper(err, encoding="utf-8", errors="replace", write_through=True))
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        status = cli_app.run(argv)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    result = status, out.getvalue().decode(errors="replace"), err.getvalue().decode(
        errors="replace")
    for stream in streams:
        stream.detach()  # not closed by the wrapper's collection before the values are read
    return result


def broken(draw: Any, text: bytes, kind: str) -> bytes:
    """``text`` broken as ``kind`` says: ``random`` (other bytes altogether), ``utf8`` (invalid
    UTF-8 inserted), ``truncated``, ``nul`` (a NUL byte inserted); any other kind: as it is.
    ``draw`` is a hypothesis ``DrawFn``."""
    if kind == "random":
        return bytes(draw(st.binary(max_size=200)))
    if kind == "truncated":
        return text[:draw(st.integers(0, len(text) - 1))]
    if kind in ("utf8", "nul"):
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + (b"\xff\xfe" if kind == "utf8" else b"\x00") + text[cut:]
    return text
