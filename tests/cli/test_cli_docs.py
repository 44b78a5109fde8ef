"""Every CLI command has ``--help`` with an example, opens no database for it, and is
documented in README.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main

from sqew.cli import app

README = Path(__file__).resolve().parents[2] / "README.md"


def command_paths() -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(groups, leaf commands) of the sqew app, as argument tuples."""
    groups: list[tuple[str, ...]] = []
    leaves: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            leaves.append(path)
            return
        groups.append(path)
        for name, sub in subcommands.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return groups, leaves


def test_the_commands_of_spec_section_3_exist() -> None:
    _, leaves = command_paths()
    expected = {
        ("db", "upgrade"), ("stats",),
        *(("queue", c) for c in ("list", "add", "update", "rm", "show", "purge", "peek",
                                 "requeue-dlq", "compact")),
        *(("message", c) for c in ("enqueue", "get", "poll", "ack", "nack", "extend-lease",
                                   "peek", "remove")),
        *(("dlq", c) for c in ("list", "purge", "requeue")),
    }
    assert expected <= set(leaves)


@pytest.mark.local_only
def test_help_of_every_command_works_without_opening_a_database(sqew, tmp_path) -> None:
    _, leaves = command_paths()
    paths = [(), ("queue",), *leaves]  # the root, a group, every command
    results = sqew.many([(*path, "--help") for path in paths],
                        env={"SQEW_DB": str(tmp_path / "never.db")}, use_db=False)
    for path, result in zip(paths, results, strict=True):
        assert result.returncode == 0, str(result)
        assert "Usage:" in result.stdout and "Traceback" not in result.stderr, str(result)
        if path in leaves:
            assert "Example" in result.stdout, f"`sqew {' '.join(path)} --help` has no example"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_is_in_the_readme() -> None:
    text = README.read_text()
    _, leaves = command_paths()
    missing = [" ".join(p) for p in leaves if f"sqew {' '.join(p)}" not in text]
    assert not missing, f"commands missing from README.md: {missing}"
