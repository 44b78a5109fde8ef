"""``Client.enqueue_many``: batches, progress, failures, and the retry policy, on every target.

The refusals retried are real: a queue's rate limit and its ``max_depth`` quota, answered by
the service (a LocalClient) or by a real server as ``429`` with ``Retry-After``.
"""

from __future__ import annotations

import msgspec
import pytest

import sqew
from sqew import errors
from sqew.client.bulk import EnqueueSummary, Failure, Progress, RetryPolicy
from tests.targets import Target


def _payloads(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"payload": {"n": i}} for i in range(start, start + n)]


def test_messages_go_in_batches_with_progress_after_each(client: sqew.Client) -> None:
    client.create_queue("q")
    seen: list[Progress] = []
    summary = client.enqueue_many("q", iter(_payloads(1234)), batch_size=500,
                                  on_progress=seen.append)
    assert (summary.enqueued, summary.duplicates, summary.failed_total) == (1234, 0, 0)
    assert summary.failed == [] and summary.retries == 0
    assert [(p.indexes[0], p.indexes[-1], len(p.results)) for p in seen] == [
        (0, 499, 500), (500, 999, 500), (1000, 1233, 234)]
    assert [p.summary.enqueued for p in seen] == [500, 1000, 1234]
    ids = [r.message_id for p in seen for r in p.results]
    assert ids == sorted(ids) and len(set(ids)) == 1234
    assert client.stats("q").ready == 1234
    assert [m.payload for m in client.peek("q", limit=3)] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_duplicates_are_counted_and_reported_as_enqueue_batch_does(client: sqew.Client) -> None:
    client.create_queue("q")
    first = client.enqueue("q", "before", idempotency_key="k0").message_id
    messages = [{"payload": i, "idempotency_key": f"k{i % 3}"} for i in range(6)]
    seen: list[Progress] = []
    summary = client.enqueue_many("q", messages, batch_size=4, on_progress=seen.append)
    assert (summary.enqueued, summary.duplicates) == (2, 4)
    results = [r for p in seen for r in p.results]
    assert [r.duplicate for r in results] == [True, False, False, True, True, True]
    assert results[0].message_id == results[3].message_id == first
    assert results[1].message_id == results[4].message_id


def test_invalid_messages_are_skipped_by_index_or_raise(client: sqew.Client) -> None:
    client.create_queue("q", max_payload_bytes=64)
    messages = _payloads(12)
    messages[3] = {"payload": 1, "priority": 5000}  # invalid: never sent
    messages[7] = {"payload": msgspec.Raw(b"{not json")}  # invalid: never sent
    messages[10] = {"payload": "x" * 100}  # refused by the queue: isolated
    seen: list[Progress] = []
    summary = client.enqueue_many("q", messages, batch_size=5, skip_invalid=True,
                                  on_progress=seen.append)
    assert (summary.enqueued, summary.failed_total) == (9, 3)
    assert [(f.index, f.code) for f in summary.failed] == [
        (3, "ValidationError"), (7, "ValidationError"), (10, "PayloadTooLarge")]
    assert summary.failed[0].message.startswith("priority ")
    assert not summary.failed[1].message.startswith("message ")
    settled = sorted(i for p in seen for i in p.indexes)
    assert settled == list(range(12))  # every message is reported once
    assert [p.failure for p in seen if p.failure] == summary.failed
    assert client.stats("q").ready == 9

    with pytest.raises(errors.ValidationError) as caught:
        client.enqueue_many("q", [*_payloads(3), {"payload": 1, "priority": 5000}])
    assert caught.value.message.startswith("message 3: priority ")
    assert client.stats("q").ready == 9  # the batch it was in was not sent


def test_keep_failed_bounds_the_failures_remembered(client: sqew.Client) -> None:
    client.create_queue("q")
    bad = [{"payload": 1, "priority": 5000}] * 30
    summary = client.enqueue_many("q", bad, skip_invalid=True, keep_failed=4)
    assert summary.failed_total == 30
    assert [f.index for f in summary.failed] == [0, 1, 2, 3]


def test_an_error_that_is_no_refusal_stops_at_once(client: sqew.Client) -> None:
    seen: list[Progress] = []
    with pytest.raises(errors.QueueNotFound):
        client.enqueue_many("nope", _payloads(10), on_progress=seen.append,
                            retry=RetryPolicy(initial_delay_s=0))
    assert seen == []


@pytest.mark.parametrize("size", [0, 1001])
def test_batch_size_out_of_range_is_refused(client: sqew.Client, size: int) -> None:
    client.create_queue("q")
    with pytest.raises(errors.ValidationError, match="batch_size"):
        client.enqueue_many("q", _payloads(1), batch_size=size)


def test_a_retry_policy_without_tries_is_refused() -> None:
    with pytest.raises(errors.ValidationError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_json_text_that_is_not_one_json_value_is_refused_alike(client: sqew.Client) -> None:
    """A payload given as JSON text (``msgspec.Raw``) is checked like any other: never stored
    unreadable, whatever the client."""
    client.create_queue("q")
    for text in (b"{not json", b"1 2", b'"caf\xff"', b""):
        with pytest.raises(errors.ValidationError) as caught:
            client.enqueue("q", msgspec.Raw(text))
        assert caught.value.details and caught.value.details[0]["field"] == "payload", text
        with pytest.raises(errors.ValidationError) as caught:
            client.enqueue_batch("q", [{"payload": 1}, {"payload": msgspec.Raw(text)}])
        assert caught.value.message.startswith("message 1: payload "), text
    assert client.stats("q").enqueued_total == 0
    client.enqueue("q", msgspec.Raw(b' {"a": [1, 2.5]} '))
    assert client.peek("q")[0].payload == {"a": [1, 2.5]}


# --- retries against real refusals ------------------------------------------------------------
def test_a_rate_limited_batch_is_sent_again_when_the_bucket_refills(
    realtime_target: Target,
) -> None:
    client = realtime_target.client
    client.create_queue("q", rate_limit_per_s=40)
    seen: list[Progress] = []
    summary = client.enqueue_many("q", _payloads(120), batch_size=40, on_progress=seen.append)
    assert (summary.enqueued, summary.failed_total) == (120, 0)
    assert summary.retries >= 1  # the burst is one batch: the next ones waited
    assert [len(p.results) for p in seen] == [40, 40, 40]
    assert client.stats("q").enqueued_total == 120


def test_a_refusal_past_the_attempts_bound_is_raised(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q", max_depth=1)
    client.enqueue("q", 0)
    policy = RetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.01)
    with pytest.raises(errors.QueueFull, match=r"gave up after 3 tries") as caught:
        client.enqueue_many("q", _payloads(2), retry=policy)
    assert caught.value.retry_after is not None
    assert client.stats("q").enqueued_total == 1


def test_a_refusal_past_the_time_bound_is_raised_without_waiting(
    realtime_target: Target,
) -> None:
    """QueueFull says "Retry-After: 1"; a policy allowing 0.2 s does not begin that wait."""
    client = realtime_target.client
    client.create_queue("q", max_depth=1)
    client.enqueue("q", 0)
    policy = RetryPolicy(max_attempts=100, max_elapsed_s=0.2)
    with pytest.raises(errors.QueueFull, match=r"gave up after 1 tries"):
        client.enqueue_many("q", _payloads(2), retry=policy)


def test_the_summary_is_a_plain_model() -> None:
    summary = EnqueueSummary(enqueued=2, failed=[Failure(1, "ValidationError", "bad")],
                             failed_total=1)
    assert msgspec.json.decode(msgspec.json.encode(summary)) == {
        "enqueued": 2, "duplicates": 0, "failed_total": 1, "retries": 0,
        "failed": [{"index": 1, "code": "ValidationError", "message": "bad"}]}
