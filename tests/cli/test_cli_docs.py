"""Every CLI command has ``--help`` with an example, opens no database (nor server) for it,
and is documented in README.md."""

from __future__ import annotations

from pathlib import Path

import typer.main

from sqew.cli import app, run

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


def test_help_works_without_opening_a_database_or_a_server(local_sqew, tmp_path) -> None:
    # Through the binary: the root, a group, a command, and a command given a dead --url.
    env = {"SQEW_DB": str(tmp_path / "never.db")}
    runs = [("--help",), ("queue", "--help"), ("message", "enqueue", "--help"),
            ("--url", "http://127.0.0.1:9", "message", "poll", "--help")]
    for result in local_sqew.many(runs, env=env, use_db=False):
        assert result.returncode == 0, str(result)
        assert "Usage:" in result.stdout and result.stderr == "", str(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_has_help_with_an_example(tmp_path, monkeypatch, capsys) -> None:
    # In-process (the same entry point the binary calls), to keep this sweep fast.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SQEW_DB", str(tmp_path / "never.db"))
    monkeypatch.setenv("COLUMNS", "120")
    _, leaves = command_paths()
    for path in leaves:
        status = run([*path, "--help"])
        out = capsys.readouterr().out
        assert status == 0 and "Usage:" in out, (path, status, out)
        assert "Example" in out, f"`sqew {' '.join(path)} --help` has no example"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_every_command_is_in_the_readme() -> None:
    text = README.read_text()
    _, leaves = command_paths()
    missing = [" ".join(p) for p in leaves if f"sqew {' '.join(p)}" not in text]
    assert not missing, f"commands missing from README.md: {missing}"
