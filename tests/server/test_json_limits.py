"""JSON that is valid but that readers cannot take back: too deep, or numbers out of range.

docs/rest.md: JSON nested deeper than ``max_json_depth`` (default 64) is a 400 ValidationError —
over REST (every body, not only payloads), from the Python Client and from the CLI, where a
``--file`` line that deep fails with its line number while the others are enqueued. Numbers no
client decodes back (``1e400``, a 5000-digit integer) are refused on enqueue in the same way,
and whatever is accepted is polled back equal, locally and over HTTP.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cli_runs
import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqew
from sqew import errors, jsonlimits

from .support import envelope

DEEP = 1000  # what made decoders raise RecursionError (a 500 over REST)


def nested(depth: int, leaf: str = "1") -> str:
    """JSON text of arrays nested ``depth`` deep around ``leaf`` (``[[1]]`` is 2 deep)."""
    return "[" * depth + leaf + "]" * depth


def nested_value(depth: int) -> Any:
    """The same as a Python value."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value




def post(http: httpx.Client, path: str, text: str) -> httpx.Response:
    return http.post(path, content=text, headers={"content-type": "application/json"})


def enqueued(http: httpx.Client, queue: str) -> int:
    total: int = http.get(f"{queue}/stats").json()["enqueued_total"]
    return total


# --- depth over REST -----------------------------------------------------------------------------
def test_a_payload_at_the_limit_is_taken_and_one_level_more_is_not(
    shared: httpx.Client, queue: str
) -> None:
    taken = post(shared, f"{queue}/messages", f'{{"payload": {nested(64)}}}')
    assert taken.status_code == 201, taken.text
    polled = shared.post(f"{queue}/poll").json()["messages"]
    assert polled[0]["payload"] == nested_value(64)

    error = envelope(post(shared, f"{queue}/messages", f'{{"payload": {nested(65)}}}'),
                     400, "ValidationError")
    assert "64" in error["message"] and "max_json_depth" in error["message"]
    assert error["details"][0]["field"] == "payload"


@pytest.mark.parametrize("body", [
    f'{{"payload": {nested(DEEP)}}}',
    f'{{"payload": {nested(DEEP, "{}")}}}',
    '{"payload": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
    f'{{"messages": [{{"payload": 1}}, {{"payload": {nested(DEEP)}}}]}}',
    f'{{"messages": [{{"payload": 1}}, {{"payload": {nested(65)}}}]}}',
    nested(DEEP),  # not even an object
    nested(DEEP)[:-DEEP],  # unclosed: too deep before it is malformed
], ids=["array", "objects-in-arrays", "objects", "batch", "batch-65", "bare", "unclosed"])
def test_a_payload_nested_too_deep_is_a_validation_error(
    shared: httpx.Client, queue: str, body: str
) -> None:
    error = envelope(post(shared, f"{queue}/messages", body), 400, "ValidationError")
    assert "nested deeper than 64 levels" in error["message"]
    assert enqueued(shared, queue) == 0


def test_brackets_inside_strings_do_not_count(shared: httpx.Client, queue: str) -> None:
    text = json.dumps({"payload": {"s": "[" * DEEP, "t": '\\"[{' * DEEP, "u": ["]" * DEEP]}})
    assert post(shared, f"{queue}/messages", text).status_code == 201
    assert shared.post(f"{queue}/poll").json()["messages"][0]["payload"] == json.loads(
        text)["payload"]


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("POST", "/queues", '{"name": "x", "order": ' + nested(DEEP) + "}"),
    ("POST", "/queues", nested(DEEP)),
    ("PATCH", "{q}", '{"max_attempts": ' + nested(DEEP) + "}"),
    ("POST", "{q}/ack", '{"acks": ' + nested(DEEP) + "}"),
    ("POST", "{q}/ack", '{"id": 1, "token": ' + nested(DEEP) + "}"),
    ("POST", "{q}/nack", '{"nacks": ' + nested(DEEP) + "}"),
    ("POST", "{q}/nack", nested(DEEP)),
    ("POST", "{q}/extend-lease", nested(DEEP)),
    ("POST", "{q}/dlq/requeue", '{"ids": ' + nested(DEEP) + "}"),
])
def test_any_body_nested_too_deep_is_a_400_never_a_500(
    shared: httpx.Client, queue: str, method: str, suffix: str, body: str
) -> None:
    url = suffix.replace("{q}", queue)
    response = shared.request(method, url, content=body,
                              headers={"content-type": "application/json"})
    error = envelope(response, 400, "ValidationError")
    assert "nested deeper than 64 levels" in error["message"]


def test_the_limit_is_the_servers_setting(start_server: Callable[..., Any]) -> None:
    server = start_server(max_json_depth=8)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "q"}).status_code == 201
        ok = post(http, "/queues/q/messages", f'{{"payload": {nested(8)}}}')
        assert ok.status_code == 201, ok.text
        error = envelope(post(http, "/queues/q/messages", f'{{"payload": {nested(9)}}}'),
                         400, "ValidationError")
        assert "nested deeper than 8 levels" in error["message"]
        # The HTTP client leaves the limit to the server.
        with sqew.Client(server.url) as client:
            with pytest.raises(errors.ValidationError, match="deeper than 8 levels"):
                client.enqueue("q", nested_value(9))
            with pytest.raises(errors.ValidationError, match=r"message 1: .*deeper than 8"):
                client.enqueue_batch("q", [{"payload": 1}, {"payload": nested_value(9)}])


def test_max_json_depth_is_range_checked() -> None:
    from sqew.settings import Settings, from_mapping

    assert Settings().max_json_depth == 64
    assert from_mapping({"max_json_depth": "256"}).max_json_depth == 256
    for bad in (0, 257, "deep"):
        with pytest.raises(errors.ValidationError, match="max_json_depth"):
            from_mapping({"max_json_depth": bad})


# Hypothesis's check that a recursive strategy's `extend` uses its argument misfires in a full
# run (it passes alone): both strategies below do recurse.
_RECURSES = pytest.mark.filterwarnings(
    "ignore:.*can't actually recurse:hypothesis.errors.HypothesisDeprecationWarning"
)

# The depth is measured on the text, before any decoder, with strings (and the brackets and
# escaped quotes in them) skipped: checked against the decoded value's depth.
_KEYS = st.text(alphabet='ab"\\[]{}', max_size=4)
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='ab"\\[]{}\n/u0 '))
_VALUE = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(_KEYS, inner, max_size=3)),
                      max_leaves=12)


def _depth_of(value: Any) -> int:
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, list | dict):
        return 1 + max((_depth_of(v) for v in children), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@_RECURSES
@given(value=_VALUE, wrap=st.integers(0, 20))
def test_the_depth_of_json_text_is_the_depth_of_its_value(value: Any, wrap: int) -> None:
    for _ in range(wrap):  # some deeper than the few passes that measure shallow JSON
        value = [value, "]"] if wrap % 2 else {"[": value}
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1),
                 msgspec.json.encode(value).decode()):
        assert jsonlimits.depth(text.encode()) == _depth_of(value), text


# --- depth from the Python client ----------------------------------------------------------------
@pytest.mark.parametrize("payload", [
    nested_value(65),
    nested_value(DEEP),
    nested_value(5000),  # deeper than the encoder's stack
    msgspec.Raw(nested(65).encode()),
    msgspec.Raw(nested(DEEP).encode()),
], ids=["value-65", "value-1000", "value-5000", "text-65", "text-1000"])
def test_the_client_refuses_a_payload_nested_too_deep(client: sqew.Client, payload: Any) -> None:
    # A database's limit is the documented default (docs/rest.md); an HTTP client leaves it to
    # the server and only refuses what no server takes (deeper than 256).
    client.create_queue("q")
    limit = "(64|256)"
    with pytest.raises(errors.ValidationError, match=f"nested deeper than {limit} levels"):
        client.enqueue("q", payload)
    with pytest.raises(errors.ValidationError, match=f"nested deeper than {limit} levels"):
        client.enqueue_batch("q", [{"payload": 1}, {"payload": payload}])
    assert client.stats("q").enqueued_total == 0


def test_the_local_client_names_the_message_of_a_batch(tmp_path: Path) -> None:
    with sqew.Client(str(tmp_path / "q.db")) as client:
        client.create_queue("q")
        assert client.max_json_depth == 64
        deep = r"^ValidationError: message 1: payload is nested deeper than 64 levels"
        with pytest.raises(errors.ValidationError, match=deep):
            client.enqueue_batch("q", [{"payload": 1}, {"payload": nested_value(DEEP)}])


def test_the_client_takes_a_payload_at_the_limit(client: sqew.Client) -> None:
    client.create_queue("q")
    client.enqueue("q", nested_value(64))
    client.enqueue_batch("q", [{"payload": msgspec.Raw(nested(64).encode())}])
    assert [m.payload for m in client.poll("q", batch=2)] == [nested_value(64)] * 2


# --- numbers -------------------------------------------------------------------------------------
BAD_NUMBERS = ["1e400", "-1e400", "1.8e308", "1" + "0" * 309 + ".5", "9" * 5000, "-" + "9" * 4301]


@pytest.mark.parametrize("number", BAD_NUMBERS, ids=lambda n: n[:12])
def test_a_number_no_client_can_read_back_is_refused_over_rest(
    shared: httpx.Client, queue: str, number: str
) -> None:
    error = envelope(post(shared, f"{queue}/messages", f'{{"payload": [1, {{"n": {number}}}]}}'),
                     400, "ValidationError")
    assert "send it as a string" in error["message"]
    assert error["details"][0]["field"] == "payload"
    batch = f'{{"messages": [{{"payload": 1}}, {{"payload": {number}}}]}}'
    error = envelope(post(shared, f"{queue}/messages", batch), 400, "ValidationError")
    assert error["message"].startswith("message 1: ")
    assert error["details"][0]["field"] == "messages[1].payload"
    assert enqueued(shared, queue) == 0


@pytest.mark.parametrize("number", BAD_NUMBERS, ids=lambda n: n[:12])
def test_a_number_no_client_can_read_back_is_refused_by_the_client(
    client: sqew.Client, number: str
) -> None:
    client.create_queue("q")
    with pytest.raises(errors.ValidationError, match="send it as a string"):
        client.enqueue("q", msgspec.Raw(number.encode()))
    with pytest.raises(errors.ValidationError, match=r"^ValidationError: message 1: "):
        client.enqueue_batch("q", [{"payload": 1}, {"payload": msgspec.Raw(number.encode())}])
    assert client.stats("q").enqueued_total == 0


def test_numbers_that_look_bad_but_read_back_are_taken(shared: httpx.Client, queue: str) -> None:
    payloads = ['"1e400"', "1e-400", "1.7976931348623157e308", "9" * 4300, "0." + "0" * 400 + "1",
                '{"1e400": "9' + "9" * 5000 + '"}']
    for text in payloads:
        response = post(shared, f"{queue}/messages", f'{{"payload": {text}}}')
        assert response.status_code == 201, (text[:40], response.text)
    got = shared.post(f"{queue}/poll", params={"batch": 10}).json()["messages"]
    assert [m["payload"] for m in got] == [json.loads(t) for t in payloads]


# Numbers near and past every limit: exponents around ±308 and ±400, mantissas of up to ~400
# digits, integers of up to 5000 digits.
_DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=20)
_INTEGER = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.integers(min_value=4290, max_value=4310).map(lambda n: "7" * n),
    st.integers(min_value=300, max_value=320).map(lambda n: "9" * n),
)
_FLOAT = st.builds(
    lambda sign, whole, fraction, exp: f"{sign}{whole.lstrip('0') or '0'}.{fraction}{exp}",
    st.sampled_from(["", "-"]),
    st.one_of(_DIGITS, st.integers(300, 320).map(lambda n: "9" * n)),
    _DIGITS,
    st.one_of(st.just(""), st.builds(lambda e, n: f"{e}{n}", st.sampled_from(["e", "E", "e+",
                                                                             "e-"]),
                                     st.integers(0, 420))),
)
_NUMBER = st.one_of(_INTEGER, _FLOAT)
_JSON_TEXT = st.recursive(
    st.one_of(_NUMBER, st.sampled_from(['"1e400"', "true", "null", '"x"'])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(inner, max_size=3).map(
            lambda items: "{" + ",".join(f'"k{i}":{v}' for i, v in enumerate(items)) + "}"),
    ),
    max_leaves=5,
)


def readable(text: str) -> bool:
    """Whether every client decodes ``text`` back to finite numbers (msgspec and ``json``)."""
    try:
        msgspec.json.decode(text)
        value = json.loads(text)
    except (msgspec.ValidationError, ValueError):
        return False
    return _finite(value)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@_RECURSES
@given(text=_JSON_TEXT)
def test_what_enqueue_takes_is_polled_back_and_what_it_refuses_is_unreadable(
    client: sqew.Client, text: str
) -> None:
    with contextlib.suppress(errors.QueueExists):  # one queue for all examples of a client
        client.create_queue("h")
    try:
        client.enqueue("h", msgspec.Raw(text.encode()))
    except errors.ValidationError:
        assert not readable(text), text
        return
    assert readable(text), text
    (message,) = client.poll("h")
    assert message.payload == json.loads(text)
    client.ack("h", message.id, message.token)


# --- the CLI -------------------------------------------------------------------------------------
def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``sqew`` with ``args`` (no SQEW_* of the test process)."""
    return cli_runs.completed(args, cwd=cwd)


@pytest.fixture(params=["db", "url"])
def cli_target(request: pytest.FixtureRequest, tmp_path: Path,
           start_server: Callable[..., Any]) -> list[str]:
    """``--db FILE`` or ``--url`` of a server, with an empty queue ``q``."""
    if request.param == "db":
        args = ["--db", str(tmp_path / "cli.db")]
    else:
        args = ["--url", start_server().url]
    assert cli(*args, "queue", "add", "--name", "q", cwd=tmp_path).returncode == 0
    return args


def test_enqueue_file_reports_a_line_too_deep_and_enqueues_every_other(
    cli_target: list[str], tmp_path: Path
) -> None:
    lines = ['{"n": 1}', nested(DEEP), "[2]", nested(65), '{"n": 1e400}', "3"]
    path = tmp_path / "in.ndjson"
    path.write_text("\n".join(lines) + "\n")
    result = cli(*cli_target, "--json", "message", "enqueue", "--queue", "q", "--file",
                 str(path), cwd=tmp_path)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and "InternalError" not in result.stderr
    error = json.loads(result.stderr)["error"]  # with --json, the error envelope
    assert error["code"] == "ValidationError", result.stderr
    assert error["message"].startswith("3 line(s) failed, the first at line 2"), result.stderr
    summary = json.loads(result.stdout)
    assert summary["enqueued"] == 3
    assert [f["line"] for f in summary["failed"]] == [2, 4, 5]
    assert {f["error"]["code"] for f in summary["failed"]} == {"ValidationError"}
    assert "nested deeper than" in summary["failed"][0]["error"]["message"]
    assert "send it as a string" in summary["failed"][2]["error"]["message"]

    got = cli(*cli_target, "--json", "message", "get", "--queue", "q", "--batch", "10",
              cwd=tmp_path)
    assert [m["payload"] for m in json.loads(got.stdout)["messages"]] == [{"n": 1}, [2], 3]


def test_enqueue_file_envelope_lines_too(cli_target: list[str], tmp_path: Path) -> None:
    path = tmp_path / "in.ndjson"
    path.write_text(f'{{"payload": 1}}\n{{"payload": {nested(DEEP)}}}\n{{"payload": 2}}\n')
    result = cli(*cli_target, "--json", "message", "enqueue", "--queue", "q", "--file",
                 str(path), "--envelope", cwd=tmp_path)
    assert result.returncode == 1, result
    summary = json.loads(result.stdout)
    assert (summary["enqueued"], [f["line"] for f in summary["failed"]]) == (2, [2])


@pytest.mark.parametrize("payload", [nested(65), nested(DEEP), nested(5000), "1e400"],
                         ids=["65", "1000", "5000", "1e400"])
def test_enqueue_payload_refuses_it_in_one_line(
    cli_target: list[str], tmp_path: Path, payload: str
) -> None:
    result = cli(*cli_target, "message", "enqueue", "--queue", "q", "--payload", payload,
                 cwd=tmp_path)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ValidationError: payload "), result.stderr
    assert result.stderr.count("\n") == 1
    if payload != "1e400":  # the same words on a file and through a server (its limit, 64)
        assert "nested deeper than 64 levels (max_json_depth)" in result.stderr, result.stderr
