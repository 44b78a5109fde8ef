"""The ``sqew`` command line's argument parsing never fails with a traceback.

Generated argument lists — real command paths, real option names of the command (and the
global ones), values that are junk, missing, empty, unicode, huge or negative numbers, unknown
options — run in this process through ``sqew.cli.app.run`` (as ``sqew.cli.main`` runs it,
without the process's exit) on a real database file holding a queue and messages. Every run
must end as docs/cli.md says: status 0, or 1 with one line ``error: <Code>: <message>``, or 2
with one line ``error: usage: …``; never a traceback and never ``InternalError`` (an
exception sqew did not expect).

Left out: ``serve`` (it would serve), ``--wait-ms`` (a valid one waits up to 20 s for a
message) and URLs that name another host (``--url`` values are this machine's closed port or
junk that is not a URL).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fuzz_support import fuzz_settings, run_cli
from hypothesis import given
from hypothesis import strategies as st

import sqew

COMMAND = typer.main.get_command(importlib.import_module("sqew.cli.app").app)
LEFT_OUT_COMMANDS = {("serve",)}
LEFT_OUT_OPTIONS = {"--wait-ms", "--url"}


def _paths(
    command: object, path: tuple[str, ...] = (),
) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    subs = getattr(command, "commands", None) or {}
    options = [o for p in getattr(command, "params", []) for o in p.opts if o.startswith("-")]
    if path not in LEFT_OUT_COMMANDS:
        yield path, [o for o in options if o not in LEFT_OUT_OPTIONS]
        for name, sub in subs.items():
            yield from _paths(sub, (*path, name))


PATHS = [p for p in _paths(COMMAND) if p[0] not in LEFT_OUT_COMMANDS]
GLOBAL_OPTIONS = PATHS[0][1]

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**400]),
).map(str)
JUNK = st.one_of(
    NUMBERS,
    st.sampled_from(["", " ", "-", "--", "nan", "inf", "-inf", "1e400", "1.5", "0x10", "true",
                     "null", "{}", "[]", '{"a":', "1:a", "1:a,,2:b", "1:a,1:a", ":", ",",
                     "jobs", "jobs.dlq", "nope", "dlq", "archive", "queue", "fifo", "priority",
                     "read", "write", "admin", "k=v", "=", "\x00", "é", "😀", "\u202e",
                     "http://127.0.0.1:1", "not a url", "sqew.db", ":memory:", "a" * 5000]),
    st.text(max_size=30),
)
UNKNOWN_OPTIONS = st.sampled_from(["--nope", "-x", "--", "--json=1", "--db=", "---", "-"])


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """A command path, then a mix of its options with junk or missing values."""
    path, options = draw(st.sampled_from(PATHS))
    argv = list(path)
    names = st.sampled_from(options + GLOBAL_OPTIONS) if options + GLOBAL_OPTIONS else None
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 9))
        if kind <= 5 and names is not None:
            name = draw(names)
            value = draw(JUNK)
            argv += [f"{name}={value}"] if kind == 0 else [name, value]
        elif kind <= 7 and names is not None:
            argv.append(draw(names))  # its value missing (or the next token taken as it)
        elif kind == 8:
            argv.append(draw(UNKNOWN_OPTIONS))
        else:
            argv.append(draw(JUNK))  # a stray argument
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database file with a queue holding a few messages (one of them leased)."""
    db = tmp_path_factory.mktemp("cli-fuzz") / "sqew.db"
    with sqew.Client(str(db)) as client:
        client.create_queue("jobs")
        for i in range(5):
            client.enqueue("jobs", {"i": i})
        client.poll("jobs")
    return db



def check(argv: list[str], status: int, stdout: str, stderr: str) -> None:
    """The outcome docs/cli.md allows."""
    shown = f"sqew {argv!r} -> {status}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}"
    assert "Traceback" not in stdout + stderr, shown
    assert "InternalError" not in stderr, shown
    assert status in (0, 1, 2), shown
    if status == 0:
        return
    lines = stderr.splitlines()
    if "--json" in argv and status == 1 and lines and lines[-1].startswith('{"error"'):
        assert len(lines) == 1, shown  # the error envelope, one line
        return
    assert len(lines) == 1, shown
    prefix = "error: usage: " if status == 2 else "error: "
    assert lines[0].startswith(prefix), shown


@fuzz_settings(examples=40)
@given(argv=argvs())
def test_generated_arguments_end_cleanly(
    argv: list[str], database: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workdir = tmp_path_factory.mktemp("cwd")  # where a junk --out or --db would land
    with contextlib.chdir(workdir):
        full = ["--db", str(database), *argv]
        check(full, *run_cli(full))
