"""The queue settings have one declaration (``sqew.queue_settings.SETTINGS``): the CLI's
``queue add`` and ``queue update`` options, their help, and the settings table of docs/cli.md
all agree with it."""

from __future__ import annotations

import re
from pathlib import Path

from sqew import queue_settings

README = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _flag(setting: queue_settings.Setting) -> str:
    flag = "--" + setting.name.replace("_", "-")
    return f"{flag}/--no-{flag[2:]}" if setting.type is bool else flag


def _readme_settings() -> dict[str, tuple[str, str]]:
    """``{flag: (default, range)}`` of the README's table, durations in words ("(4 d)") removed."""
    rows: dict[str, tuple[str, str]] = {}
    cell = r"((?:[^|\\]|\\.)*)"  # up to the next `|` that is not escaped as `\|`
    for line in README.read_text().splitlines():
        found = re.match(rf"^\| `(--[a-z-/]+){cell}\|{cell}\|{cell}\|$", line)
        if found:
            default, range_ = (re.sub(r" \(\d+ \w+\)", "", c).strip() for c in found.group(3, 4))
            rows[found[1]] = (default, range_)
    return rows


def test_the_readme_settings_table_is_the_models() -> None:
    rows = _readme_settings()
    declared = {_flag(s): (s.default_text, s.range) for s in queue_settings.SETTINGS}
    assert declared.items() <= rows.items()


def test_queue_add_and_update_offer_every_setting_with_its_default_and_range(local_sqew) -> None:
    for command in ("add", "update"):
        text = " ".join(local_sqew.ok("queue", command, "--help").stdout.replace("│", " ").split())
        for s in queue_settings.SETTINGS:
            flag = _flag(s).replace("/", " ")
            assert f"{flag} " in text, (command, flag)
            words = f"{s.description}. Default: {s.default_text}."
            assert words + (f" Range: {s.range}." if s.range else "") in text, (command, words)


def test_flags_show_no_value_type_in_help(local_sqew) -> None:
    for args in (("--help",), ("queue", "add", "--help"), ("message", "enqueue", "--help")):
        result = local_sqew.ok(*args)
        assert "<bool>" not in result.stdout, result.stdout
        assert re.search(r"--help +-h +Show this message", result.stdout), result.stdout


def test_every_setting_changes_through_queue_update(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    updated = sqew.json(
        "queue", "update", "--name", q, "--visibility-ms", "1", "--max-attempts", "2",
        "--backoff-base-ms", "3", "--backoff-max-ms", "4", "--retention-ms", "60005",
        "--dedup-window-ms", "1006", "--max-payload-bytes", "7", "--max-depth", "8",
        "--rate-limit-per-s", "0.5", "--order", "lifo", "--archive",
        "--hmac-secret", "a-secret-of-sixteen-bytes")
    assert {s.name: updated.get(s.name) for s in queue_settings.SETTINGS} == {
        "visibility_ms": 1, "max_attempts": 2, "backoff_base_ms": 3, "backoff_max_ms": 4,
        "retention_ms": 60005, "dedup_window_ms": 1006, "max_payload_bytes": 7,
        "max_depth": 8, "rate_limit_per_s": 0.5, "order": "lifo", "archive": True,
        "hmac_secret": None,  # write-only: never shown
    }
    unchanged = sqew.json("queue", "update", "--name", q)
    assert {k: unchanged[k] for k in updated} == updated
