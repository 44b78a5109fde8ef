"""Every endpoint by every kind of caller, generated from the app's routes (docs/rest.md, "Auth").

The endpoints are read from ``create_app().routes`` (Litestar's own handlers included), so a route
added later is in the matrix at once, and fails it unless ``NEEDS`` (written from docs/rest.md, not
from the code) says what it needs. Callers: no key, a malformed header, a wrong key, a revoked key,
a key without the scope, a key bound to another queue, the right key. One server for the module
(keys enforced because keys exist; ``metrics_auth`` on; no failure limit, which
``test_auth_modes.py`` covers), and the keys minted once before it starts (argon2: ~100 ms each).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from auth_support import bearer, create_queue, mint
from litestar import get
from targets import ServerThread, server_settings

from sqew.server import auth
from sqew.server.app import ROUTES, create_app
from sqew.server.routes import sqs as sqs_routes

from .support import envelope

QUEUE, OTHER = "mine", "other"

NEEDS = {
    "healthz": "open", "readyz": "open", "metrics": "admin",  # metrics_auth on, below
    "listQueues": "read", "getQueue": "read", "getStats": "read",
    "enqueue": "produce",
    "poll": "consume", "streamMessages": "consume", "ack": "consume", "nack": "consume",
    "extendLease": "consume",
    "peek": "consume", "getMessage": "consume", "listDlq": "consume", "scanMessages": "consume",
    "createQueue": "admin", "updateQueue": "admin", "deleteQueue": "admin",
    "compactQueue": "admin", "removeMessage": "admin", "purgeQueue": "admin",
    "pauseQueue": "admin", "resumeQueue": "admin",
    "requeueDlq": "admin", "purgeDlq": "admin",
    "createKey": "admin", "listKeys": "admin", "revokeKey": "admin",
}
"""What each operation needs (docs/rest.md, "Auth": its table of scopes)."""

CALLERS = ("no key", "malformed", "wrong key", "revoked", "wrong scope", "other queue", "right key")


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # with the path parameters filled in
    need: str
    has_queue: bool

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _fill(path: str) -> str:
    path = path.replace("{q:str}", QUEUE).replace("{id:int}", "1")
    path = path.replace("{id:str}", "0123456789abcdef")
    return re.sub(r"\{[^}]+\}", "x", path)


def endpoints() -> list[Endpoint]:
    """Every method of every route of the app, with what it needs."""
    out: list[Endpoint] = []
    for route in create_app().routes:
        for handler in getattr(route, "route_handlers", []):
            if handler.fn.__module__ == sqs_routes.__name__:
                continue  # the SQS endpoint answers in AWS's shapes: tests/sqs checks it
            if handler.fn.__module__.startswith("sqew.server.ui."):
                continue  # the dashboard's pages and forms: tests/server/test_ui_http.py
            for method in sorted(handler.http_methods):
                if handler.operation_id is not None:
                    need = NEEDS[handler.operation_id]  # a new operation must be listed
                elif method == "OPTIONS":
                    need = "open"  # Litestar's automatic answer: only the allowed methods
                else:
                    need = "admin"  # anything else undeclared needs the most (fails closed)
                out.append(Endpoint(method, _fill(route.path), need,
                                    "{q:str}" in route.path))
    return sorted(out, key=str)  # one order in every xdist worker (Litestar's varies)


ENDPOINTS = endpoints()


@dataclass
class Keyed:
    url: str
    keys: dict[str, str]
    revoked: str


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keyed]:
    """The module's server with its keys (``scopes@queue`` -> key), one of them revoked."""
    db: Path = tmp_path_factory.mktemp("auth") / "keys.db"
    for name in (QUEUE, OTHER):
        create_queue(db, name)
    specs = {"admin": ("admin",), "produce,consume": ("produce", "consume")}
    keys = {label: mint(db, *scopes).key for label, scopes in specs.items()}
    keys |= {f"{label}@{QUEUE}": mint(db, *scopes, queue=QUEUE).key
             for label, scopes in BOUND.items()}
    keys[f"admin@{OTHER}"] = mint(db, "admin", queue=OTHER).key
    doomed = mint(db, "admin")
    server = ServerThread(server_settings(db, metrics_auth=True, auth_failures_per_minute=0))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.get("/queues", headers=bearer(doomed.key)).status_code == 200
            revoked = http.delete(f"/keys/{doomed.id}", headers=bearer(keys["admin"]))
            assert revoked.status_code == 204, revoked.text
        yield Keyed(server.url, keys, doomed.key)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http(keyed: Keyed) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=keyed.url, timeout=30) as client:
        yield client


BOUND = {"admin": ["admin"], "produce": ["produce"], "consume": ["consume"],
         "produce,consume": ["produce", "consume"]}


@pytest.fixture
def queues(http: httpx.Client, keyed: Keyed) -> None:
    """Both queues exist (the matrix's right keys delete and purge them), with their bound
    keys: deleting a queue revokes the keys bound to it, so a queue made again gets new ones."""
    admin = bearer(keyed.keys["admin"])
    for name in (QUEUE, OTHER):
        made = http.post("/queues", json={"name": name}, headers=admin)
        assert made.status_code in (201, 409), made.text
        if made.status_code == 201:
            bound = BOUND if name == QUEUE else {"admin": ["admin"]}
            for label, scopes in bound.items():
                minted = http.post("/keys", json={"queue": name, "scopes": scopes},
                                   headers=admin)
                assert minted.status_code == 201, minted.text
                keyed.keys[f"{label}@{name}"] = minted.json()["key"]


def _key(keyed: Keyed, endpoint: Endpoint, caller: str) -> dict[str, str]:
    """The Authorization header ``caller`` sends to ``endpoint`` (none for "no key")."""
    k, need = keyed.keys, endpoint.need
    bound = f"@{QUEUE}" if endpoint.has_queue else ""
    if caller == "no key":
        return {}
    if caller == "malformed":
        return {"Authorization": "Bearer not-a-key"}
    if caller == "wrong key":  # well-formed, an id nobody has
        return bearer(f"sqew_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}")
    if caller == "revoked":
        return bearer(keyed.revoked)
    if caller == "other queue":
        return bearer(k[f"admin@{OTHER}"])
    if caller == "wrong scope":
        lacking = {"read": f"produce@{QUEUE}", "produce": f"consume@{QUEUE}",
                   "consume": f"produce@{QUEUE}", "admin": f"produce,consume{bound}",
                   "open": f"produce@{QUEUE}"}
        return bearer(k[lacking[need]])
    right = {"read": f"consume@{QUEUE}", "produce": f"produce@{QUEUE}",
             "consume": f"consume@{QUEUE}", "admin": f"admin{bound}", "open": "admin"}
    return bearer(k[right[need]])


def _expected(endpoint: Endpoint, caller: str) -> tuple[int, str] | None:
    """The refusal ``caller`` gets from ``endpoint``; None: it gets past auth."""
    need = endpoint.need
    if need == "open" or caller == "right key":
        return None
    if caller in ("no key", "malformed", "wrong key", "revoked"):
        return 401, "Unauthorized"
    if need == "read" and (caller == "wrong scope" or not endpoint.has_queue):
        return None  # any scope reads; GET /queues lists what a bound key reaches
    return 403, "Forbidden"


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_every_endpoint_answers_every_caller(
    http: httpx.Client, keyed: Keyed, queues: None, endpoint: Endpoint, caller: str
) -> None:
    headers = _key(keyed, endpoint, caller)
    with http.stream(endpoint.method, endpoint.path, headers=headers) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            # A stream that got past auth never ends: its first event is enough.
            assert next(response.iter_lines()) == ": open", endpoint
            assert _expected(endpoint, caller) is None, endpoint
            return
        response.read()
    sent = headers.get("Authorization", "").removeprefix("Bearer ")
    assert not sent or sent not in response.text  # never echoed
    expected = _expected(endpoint, caller)
    if expected is None:
        assert response.status_code not in (401, 403, 429), response.text
        return
    status, code = expected
    envelope(response, status, code)
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_the_matrix_covers_every_operation() -> None:
    """Every operation docs/rest.md lists is in the matrix (and nothing is listed that is gone)."""
    app = create_app()
    operations = {h.operation_id for r in app.routes for h in getattr(r, "route_handlers", [])
                  if h.operation_id is not None}
    assert operations == set(NEEDS)
    declared = {h.operation_id: h.opt["access"] for r in app.routes
                for h in getattr(r, "route_handlers", []) if h.operation_id is not None}
    assert {op: ("admin" if a == "metrics" else a) for op, a in declared.items()} == NEEDS


@pytest.mark.parametrize("value", [
    "Basic dXNlcjpwYXNz", "Bearer", "Token {key}", "{key}", "Bearer {key}x",
    "Bearer {key} {key}", "Bearer sqew_0123456789abcdef_short", "Bearer \u00e9{key}",
])
def test_malformed_headers_are_401(http: httpx.Client, keyed: Keyed, value: str) -> None:
    value = value.format(key=keyed.keys["admin"])
    response = http.get("/queues", headers={"Authorization": value.encode("utf-8")})
    error = envelope(response, 401, "Unauthorized")
    assert keyed.keys["admin"] not in error["message"]


def test_two_authorization_headers_are_401(http: httpx.Client, keyed: Keyed) -> None:
    key = bearer(keyed.keys["admin"])["Authorization"]
    response = http.get("/queues", headers=[("Authorization", key), ("Authorization", key)])
    envelope(response, 401, "Unauthorized")


def test_the_scheme_is_case_insensitive(http: httpx.Client, keyed: Keyed) -> None:
    response = http.get("/queues", headers={"Authorization": f"bearer {keyed.keys['admin']}"})
    assert response.status_code == 200, response.text


def test_a_wrong_secret_for_a_real_id_is_401(http: httpx.Client, keyed: Keyed) -> None:
    real = keyed.keys["admin"]
    forged = real[: -43] + secrets.token_urlsafe(32)  # same id, another secret
    envelope(http.get("/queues", headers=bearer(forged)), 401, "Unauthorized")
    assert http.get("/queues", headers=bearer(real)).status_code == 200


def test_a_bound_key_lists_and_reaches_only_its_queue_and_dlq(
    http: httpx.Client, keyed: Keyed, queues: None
) -> None:
    mine = bearer(keyed.keys[f"consume@{QUEUE}"])
    listed = http.get("/queues", headers=mine).json()["queues"]
    assert {q["name"] for q in listed} == {QUEUE, f"{QUEUE}.dlq"}
    everything = http.get("/queues", headers=bearer(keyed.keys["admin"])).json()["queues"]
    assert {QUEUE, OTHER} <= {q["name"] for q in everything}
    assert http.get(f"/queues/{QUEUE}.dlq/stats", headers=mine).status_code == 200
    assert http.post(f"/queues/{QUEUE}.dlq/poll", headers=mine).status_code == 200
    envelope(http.get(f"/queues/{OTHER}.dlq/stats", headers=mine), 403, "Forbidden")


def test_a_key_minted_over_http_works_at_once_and_its_use_is_recorded(
    http: httpx.Client, keyed: Keyed, queues: None
) -> None:
    admin = bearer(keyed.keys["admin"])
    made = http.post("/keys", json={"scopes": ["produce"], "queue": QUEUE, "name": "fresh"},
                     headers=admin)
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    sent = http.post(f"/queues/{QUEUE}/messages", json={"payload": 1}, headers=bearer(key))
    assert sent.status_code == 201, sent.text
    deadline = time.monotonic() + 15  # recorded in the background, about once a second
    while True:
        listed = {k["id"]: k for k in http.get("/keys", headers=admin).json()["keys"]}
        if listed[made.json()["id"]]["last_used_at"] is not None:
            break
        assert time.monotonic() < deadline, "last_used_at was never recorded"
        time.sleep(0.05)
    assert key not in http.get("/keys", headers=admin).text


def test_a_bound_key_does_not_reach_a_new_queue_of_its_deleted_queues_name(
    http: httpx.Client, keyed: Keyed
) -> None:
    """Deleting a queue revokes the keys bound to it; in the process that deleted it at
    once (as ``DELETE /keys/{id}`` does), not only when the cached key is next confirmed."""
    admin = bearer(keyed.keys["admin"])
    assert http.post("/queues", json={"name": "doomed"}, headers=admin).status_code == 201
    made = http.post("/keys", json={"scopes": ["produce"], "queue": "doomed"}, headers=admin)
    bound = bearer(made.json()["key"])
    sent = http.post("/queues/doomed/messages", json={"payload": 1}, headers=bound)
    assert sent.status_code == 201, sent.text  # verified, and now in the cache
    assert http.delete("/queues/doomed", headers=admin).status_code == 204
    assert http.post("/queues", json={"name": "doomed"}, headers=admin).status_code == 201
    envelope(http.post("/queues/doomed/messages", json={"payload": 2}, headers=bound),
             401, "Unauthorized")
    assert http.get("/queues/doomed/stats", headers=admin).json()["ready"] == 0


def test_the_principal_is_not_needed_on_open_routes(http: httpx.Client) -> None:
    for path in ("/healthz", "/readyz"):
        response = http.get(path, headers={"Authorization": "Bearer garbage"})
        assert response.status_code == 200, response.text


def test_a_route_that_declares_no_access_is_refused() -> None:
    """``create_app`` checks its routes with ``check_routes``: a handler without
    ``opt["access"]`` (or with an unknown one) stops the app from being built."""

    @get("/new", operation_id="newThing")
    async def new_thing() -> None: ...

    @get("/typo", operation_id="typo", opt={"access": "public"})
    async def typo() -> None: ...

    for handler in (new_thing, typo):
        with pytest.raises(RuntimeError, match="must declare"):
            auth.check_routes([*ROUTES, handler])
    auth.check_routes(ROUTES)
