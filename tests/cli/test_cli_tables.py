"""Human output on an 80-column terminal hides nothing that matters: the whole ``id:token``
handle, priority, attributes and the start of every payload (as blocks of lines when a table
would not fit); every scope and name of a key; ``--wide`` prints tables whole; and a stats
value is in its name's unit."""

from __future__ import annotations

import re

PAYLOAD = '{"to": "a@example.com", "subject": "the quarterly report, attached as a PDF"}'
NARROW = {"COLUMNS": "80"}


def test_an_80_column_terminal_shows_what_matters(local_sqew) -> None:
    sqew = local_sqew
    with sqew.arrange("mail") as client:
        client.enqueue("mail", {"first": True})
    sqew.ok("message", "enqueue", "--queue", "mail", "--payload", PAYLOAD, "--priority", "7",
            "--attr", "tenant=acme", "--attr", "src=web")
    peeked = sqew.ok("queue", "peek", "--name", "mail", env=NARROW).stdout
    assert "tenant=acme src=web" in peeked and '{"to": "a@example.com"' in peeked
    polled = sqew.ok("message", "get", "--queue", "mail", "--batch", "2", env=NARROW).stdout
    assert all(len(line) <= 80 for line in polled.splitlines())
    handles = re.findall(r"\b\d+:[0-9a-f]{32}\b", polled)
    assert len(handles) == 2  # whole, to ack with
    assert "7" in polled and "tenant=acme src=web" in polled
    assert '{"first": true}' in polled.replace('{"first":true}', '{"first": true}')
    assert '{"to": "a@example.com"' in polled


def test_keys_list_cuts_no_scope_or_name(local_sqew) -> None:
    sqew = local_sqew
    made = sqew.run("keys", "create", "--scope", "admin,consume,produce", "--name",
                    "nightly-billing-exporter")
    assert made.returncode == 0, str(made)
    listed = sqew.ok("keys", "list", env=NARROW).stdout
    assert all(len(line) <= 80 for line in listed.splitlines())
    assert "…" not in listed  # long cells wrap onto more lines, none is cut
    assert {"admin,", "consume,", "produce"} <= set(listed.split())
    wide = sqew.ok("--wide", "keys", "list", env=NARROW).stdout
    assert "admin, consume, produce" in wide and "nightly-billing-exporter" in wide


def test_wide_prints_a_table_whole_on_one_line_per_row(local_sqew) -> None:
    sqew = local_sqew
    with sqew.arrange("mail") as client:
        client.enqueue("mail", {"long": "x" * 300}, attributes={"tenant": "acme"})
    wide = sqew.ok("--wide", "queue", "peek", "--name", "mail", env=NARROW).stdout
    rows = wide.splitlines()
    assert len(rows) == 3  # header, rule, the message
    assert rows[2].rstrip().endswith('"x' + "x" * 299 + '"}') or ("x" * 300) in rows[2]
    assert "tenant=acme" in rows[2]


def test_stats_values_are_in_their_names_unit(local_sqew) -> None:
    sqew = local_sqew
    with sqew.arrange("q") as client:
        client.enqueue("q", 1)
    out = sqew.ok("stats", "--queue", "q").stdout
    (line,) = [x for x in out.splitlines() if x.startswith("oldest_ready_age_ms")]
    assert re.fullmatch(r"oldest_ready_age_ms\s+\d+ \([\d.]+m?s\)\s*", line), line
