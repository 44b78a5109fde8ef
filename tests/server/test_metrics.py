"""``/metrics`` of a real server on 127.0.0.1, parsed with prometheus-client's own parser.

What it shows moves exactly with what was done (5 enqueues: +5), requests are labelled by route
template (never the raw path), and every refusal is counted by queue and reason. Each test has a
server of its own, so every count starts from what the test did.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from auth_support import bearer, create_queue, mint
from metrics_support import Samples, labels_of, parse, value
from targets import ServerThread

from .support import envelope

Start = Callable[..., ServerThread]
MESSAGES = "/queues/{q}/messages"
SECRET = "an-hmac-secret-of-more-than-16-bytes"


def scrape(http: httpx.Client, **headers: str) -> Samples:
    response = http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain"), response.headers
    return parse(response.text)


def test_counters_move_exactly_with_the_operations(start_server: Start) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "jobs", "max_attempts": 1}).status_code == 201
        before = scrape(http)
        for i in range(5):
            assert http.post("/queues/jobs/messages", json={"payload": i}).status_code == 201
        for _ in range(2):  # the second is a duplicate
            http.post("/queues/jobs/messages", json={"payload": "x"},
                      headers={"Idempotency-Key": "k"}).raise_for_status()
        leased = http.post("/queues/jobs/poll", params={"batch": 4}).json()["messages"]
        assert len(leased) == 4
        acks = [{"id": m["id"], "token": m["token"]} for m in leased[:3]]
        assert http.post("/queues/jobs/ack", json={"acks": acks}).status_code == 200
        nack = {"id": leased[3]["id"], "token": leased[3]["token"]}
        assert http.post("/queues/jobs/nack", json=nack).status_code == 200  # to the DLQ
        after = scrape(http)
        stats = http.get("/queues/jobs/stats").json()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("sqew_queue_enqueued_total", queue="jobs") == 6
    assert delta("sqew_queue_duplicates_total", queue="jobs") == 1
    assert delta("sqew_queue_acked_total", queue="jobs") == 3
    assert delta("sqew_queue_dead_lettered_total", queue="jobs") == 1
    assert value(after, "sqew_queue_nacked_total", queue="jobs") == stats["nacked_total"]
    assert value(after, "sqew_queue_dlq", queue="jobs") == 1
    assert value(after, "sqew_queue_ready", queue="jobs.dlq") == 1
    created = {"method": "POST", "route": MESSAGES, "status": "201"}
    assert delta("sqew_http_requests_total", **created) == 7
    assert delta("sqew_http_request_duration_seconds_count", **created) == 7
    assert delta("sqew_http_request_duration_seconds_bucket", **created, le="+Inf") == 7
    for route in ("/queues/{q}/poll", "/queues/{q}/ack", "/queues/{q}/nack"):
        assert delta("sqew_http_requests_total", method="POST", route=route, status="200") == 1
    # the scrape before is counted in the scrape after (a scrape counts itself only later)
    assert delta("sqew_http_requests_total", method="GET", route="/metrics", status="200") == 1
    # 7 enqueues, a poll, an ack and a nack: each one operation of some group commit
    assert delta("sqew_group_commit_batch_size_sum") >= 10
    assert delta("sqew_group_commit_batch_size_count") >= 1
    assert delta("sqew_db_transaction_seconds_count") == delta("sqew_group_commit_batch_size_count")
    assert value(after, "sqew_build_info", version=_version()) == 1


def test_rejections_are_counted_by_queue_and_reason(start_server: Start) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for spec in ({"name": "small", "max_depth": 1}, {"name": "slow", "rate_limit_per_s": 1},
                     {"name": "signed", "hmac_secret": SECRET}, {"name": "plain"}):
            assert http.post("/queues", json=spec).status_code == 201
        before = scrape(http)
        full = [http.post("/queues/small/messages", json={"payload": i}) for i in range(3)]
        assert [r.status_code for r in full] == [201, 429, 429]
        envelope(full[1], 429, "QueueFull")
        limited = [http.post("/queues/slow/messages", json={"payload": i}) for i in range(4)]
        refused = [r for r in limited if r.status_code == 429]
        assert refused and all(envelope(r, 429, "RateLimited") for r in refused)
        envelope(http.post("/queues/plain/messages", json={"nope": 1}), 400, "ValidationError")
        envelope(http.post("/queues/plain/poll", params={"batch": 0}), 400, "ValidationError")
        envelope(http.post("/queues/plain/messages", content=b"{", headers={
            "content-type": "application/json"}), 400, "InvalidRequest")
        envelope(http.post("/queues/signed/messages", json={"payload": 1}), 401,
                 "InvalidSignature")
        after = scrape(http)

    def rejected(queue: str, reason: str) -> float:
        return (value(after, "sqew_rejected_total", queue=queue, reason=reason)
                - value(before, "sqew_rejected_total", queue=queue, reason=reason))

    assert rejected("small", "quota") == 2
    assert rejected("slow", "rate_limit") == len(refused)
    assert rejected("plain", "validation") == 3
    assert rejected("signed", "signature") == 1
    assert labels_of(after, "sqew_rejected_total", "reason") == {
        "quota", "rate_limit", "validation", "signature"}


def test_auth_refusals_are_counted_as_auth(start_server: Start, tmp_path: Any) -> None:
    db = tmp_path / "auth.db"
    produce = mint(db, "produce").key
    create_queue(db, "orders")
    server = start_server(db=str(db), auth_failures_per_minute=0)  # /metrics stays open
    with httpx.Client(base_url=server.url, timeout=30) as http:
        envelope(http.get("/queues/orders/stats"), 401, "Unauthorized")
        envelope(http.post("/queues/orders/poll", headers=bearer(produce)), 403, "Forbidden")
        envelope(http.get("/queues", headers=bearer("sqew_nokey_wrong")), 401, "Unauthorized")
        envelope(http.get("/queues/no-such-queue/peek"), 401, "Unauthorized")
        samples = scrape(http)
    assert value(samples, "sqew_rejected_total", queue="orders", reason="auth") == 2
    assert value(samples, "sqew_rejected_total", queue="", reason="auth") == 1
    assert value(samples, "sqew_rejected_total", queue="_unknown", reason="auth") == 1
    assert labels_of(samples, "sqew_rejected_total", "reason") == {"auth"}
    # refused before the handler ran, still counted by route and status
    assert value(samples, "sqew_http_requests_total", method="GET",
                 route="/queues/{q}/stats", status="401") == 1
    assert value(samples, "sqew_http_requests_total", method="POST",
                 route="/queues/{q}/poll", status="403") == 1


def test_anonymous_requests_for_made_up_queues_never_become_labels(
    start_server: Start, tmp_path: Any
) -> None:
    """A queue label is a queue that exists: refusals naming any other queue are counted
    under ``queue="_unknown"``, so made-up names cannot grow /metrics or use up the labels
    that real queues need."""
    db = tmp_path / "flood.db"
    mint(db, "admin")
    create_queue(db, "jobs")
    server = start_server(db=str(db), auth_failures_per_minute=0)  # every one a 401
    made_up = 300
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for i in range(made_up):
            envelope(http.post(f"/queues/made-up-{i}/messages", json={"payload": 1}), 401,
                     "Unauthorized")
        envelope(http.post("/queues/jobs/messages", json={"payload": 1}), 401, "Unauthorized")
        envelope(http.get("/queues/jobs.dlq/stats"), 401, "Unauthorized")
        samples = scrape(http)
        assert labels_of(samples, "sqew_rejected_total", "queue") == {
            "_unknown", "jobs", "jobs.dlq"}
        assert value(samples, "sqew_rejected_total", queue="_unknown", reason="auth") == made_up
        assert value(samples, "sqew_rejected_total", queue="jobs", reason="auth") == 1
        # known from now on: counted under its name at once
        envelope(http.post("/queues/jobs/messages", json={"payload": 2}), 401, "Unauthorized")
        samples = scrape(http)
    assert value(samples, "sqew_rejected_total", queue="jobs", reason="auth") == 2
    assert not any("made-up" in name for name in labels_of(samples, "sqew_rejected_total",
                                                           "queue"))


def test_long_polls_waiting_and_overload(start_server: Start) -> None:
    server = start_server(max_waiting_polls=1)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "w"}).status_code == 201
        got: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: got.append(httpx.post(
            f"{server.url}/queues/w/poll", params={"wait_ms": 20_000}, timeout=30)))
        waiting.start()
        try:
            assert _until(lambda: value(scrape(http), "sqew_long_polls_waiting") == 1)
            envelope(http.post("/queues/w/poll", params={"wait_ms": 1000}), 503, "Overloaded")
        finally:
            http.post("/queues/w/messages", json={"payload": 1}).raise_for_status()
            waiting.join(30)
        assert got and len(got[0].json()["messages"]) == 1
        samples = scrape(http)
    assert value(samples, "sqew_long_polls_waiting") == 0
    assert value(samples, "sqew_rejected_total", queue="w", reason="overload") == 1


def test_routes_are_templates_never_raw_paths(start_server: Start) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/queues", json={"name": "secret-name-1"}).raise_for_status()
        mid = http.post("/queues/secret-name-1/messages", json={"payload": 1}).json()["message_id"]
        assert http.get(f"/queues/secret-name-1/messages/{mid}").status_code == 200
        assert http.get("/queues/secret-name-2/messages/123456").status_code == 404
        assert http.get("/no/such/secret-name-3").status_code == 404
        samples = scrape(http)
    routes = labels_of(samples, "sqew_http_requests_total", "route")
    templates = {re.sub(r"\{(\w+):[^}]*\}", r"{\1}", r.path) for r in server.app.routes}
    assert routes <= templates | {"unmatched"}, routes - templates
    assert {MESSAGES, "/queues/{q}/messages/{id}", "unmatched"} <= routes
    assert not any("secret-name" in r for r in routes)
    found = {"method": "GET", "route": "/queues/{q}/messages/{id}"}
    assert value(samples, "sqew_http_requests_total", **found, status="200") == 1
    assert value(samples, "sqew_http_requests_total", **found, status="404") == 1
    assert value(samples, "sqew_http_requests_total", method="GET", route="unmatched",
                 status="404") == 1


def test_with_metrics_off_only_the_database_is_read(start_server: Start) -> None:
    server = start_server(metrics=False)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/queues", json={"name": "q"}).raise_for_status()
        for _ in range(2):
            http.post("/queues/q/messages", json={"payload": 1},
                      headers={"Idempotency-Key": "k"}).raise_for_status()
        envelope(http.post("/queues/q/messages", json={"x": 1}), 400, "ValidationError")
        samples = scrape(http)
    assert value(samples, "sqew_queue_enqueued_total", queue="q") == 1
    assert value(samples, "sqew_queue_ready", queue="q") == 1
    names = {name for name, _ in samples}
    for counted in ("sqew_http_requests_total", "sqew_queue_duplicates_total",
                    "sqew_rejected_total", "sqew_db_transaction_seconds_count"):
        assert counted not in names


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Wait (bounded) for ``condition``: a scrape shows state, there is no event to await."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _version() -> str:
    import sqew

    return sqew.__version__
