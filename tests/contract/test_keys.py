"""API keys through the Client: mint (the key shown once), list (never a key or its hash),
revoke, and what a key request may be.

Every test mints an admin key first and then acts with it (``acting_with``): a server enforces
keys as soon as one exists, and a local client needs none. Minting hashes with argon2 (~100 ms
each), so the tests mint few keys.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from targets import Target

import sqew
from sqew import errors, models
from sqew.core.clock import ManualClock

KEY = re.compile(r"sqew_(?P<id>[0-9a-f]+)_(?P<secret>[A-Za-z0-9_-]+)")
LISTED_FIELDS = {"id", "name", "queue", "scopes", "created_at", "last_used_at"}


@pytest.fixture
def acting_with(target: Target) -> Iterator[Callable[[str], sqew.Client]]:
    """A client of the target's store that presents ``key`` (over HTTP; locally none is needed)."""
    opened: list[sqew.Client] = []

    def open_(key: str) -> sqew.Client:
        if target.open_with_key is None:
            return target.client
        opened.append(target.open_with_key(key))
        return opened[-1]

    yield open_
    for client in opened:
        client.close()


@pytest.fixture
def admin(client: sqew.Client, acting_with: Callable[[str], sqew.Client]) -> sqew.Client:
    """A client acting with a fresh admin key, the store's first."""
    return acting_with(client.create_key(["admin"], name="first admin").key)


def secret_bytes(key: str) -> bytes:
    """The random part of a well-formed key, decoded."""
    found = KEY.fullmatch(key)
    assert found, key
    secret = found["secret"]
    return base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))


def stored_bytes(target: Target) -> bytes:
    """Everything the SQLite store holds on disk (the database and its WAL)."""
    assert target.sqlite_path is not None
    files = [target.sqlite_path, *target.sqlite_path.parent.glob(target.sqlite_path.name + "-*")]
    return b"".join(f.read_bytes() for f in files if f.is_file())


def test_create_returns_a_well_formed_key_shown_once(
    target: Target, client: sqew.Client, clock: ManualClock,
    acting_with: Callable[[str], sqew.Client],
) -> None:
    first = client.create_key(["admin"], name="ops")
    found = KEY.fullmatch(first.key)
    assert found and found["id"] == first.id
    assert len(secret_bytes(first.key)) >= 32
    assert (first.name, first.queue, first.scopes) == ("ops", None, ["admin"])
    assert (first.created_at, first.last_used_at) == (clock(), None)

    admin = acting_with(first.key)
    admin.create_queue("jobs")
    clock.advance(1)  # listed oldest first
    second = admin.create_key(["produce", "consume"], queue="jobs")
    assert second.id != first.id and secret_bytes(second.key) != secret_bytes(first.key)
    assert (second.name, second.queue, sorted(second.scopes)) == (None, "jobs",
                                                                  ["consume", "produce"])

    listed = admin.list_keys()
    assert [k.id for k in listed] == [first.id, second.id]
    assert all(type(k) is models.ApiKey for k in listed)  # not KeyCreated: no key in a listing
    text = msgspec.json.encode(models.KeyList(listed))
    assert set(msgspec.json.decode(text)["keys"][0]) == LISTED_FIELDS
    if target.sqlite_path is not None:  # only the hashes are stored
        on_disk = stored_bytes(target)
        assert on_disk.count(b"$argon2id$") >= 2
        for key in (first.key, second.key):
            secret = KEY.fullmatch(key)["secret"]  # type: ignore[index]
            assert key.encode() not in on_disk and secret.encode() not in on_disk


def test_a_listing_never_shows_a_key_or_its_hash(
    client: sqew.Client, admin: sqew.Client
) -> None:
    made = admin.create_key(["consume"], name="reader")
    text = msgspec.json.encode(models.KeyList(admin.list_keys())).decode()
    assert made.id in text and "reader" in text
    assert made.key not in text and KEY.fullmatch(made.key)["secret"] not in text  # type: ignore[index]
    assert "argon2" not in text and "$" not in text
    (listed,) = [k for k in admin.list_keys() if k.id == made.id]
    assert msgspec.structs.asdict(listed) == {
        k: v for k, v in msgspec.structs.asdict(made).items() if k != "key"}


def test_revoke_removes_the_key_from_the_list(admin: sqew.Client, clock: ManualClock) -> None:
    (first,) = admin.list_keys()
    clock.advance(1)  # listed oldest first
    other = admin.create_key(["produce"])
    assert [k.id for k in admin.list_keys()] == [first.id, other.id]
    assert admin.revoke_key(other.id) is None
    assert [k.id for k in admin.list_keys()] == [first.id]
    with pytest.raises(errors.NotFound, match=f"no API key with id '{other.id}'"):
        admin.revoke_key(other.id)  # revoked once only


@pytest.mark.parametrize("key_id", ["0123456789abcdef", "nope", "", "a/b", ".", "..", "%2F",
                                    "x" * 33])
def test_revoking_an_unknown_id_is_not_found(client: sqew.Client, key_id: str) -> None:
    with pytest.raises(errors.NotFound):
        client.revoke_key(key_id)
    assert client.list_keys() == []


def test_revoking_by_the_key_instead_of_its_id_does_not_repeat_the_key(
    client: sqew.Client, acting_with: Callable[[str], sqew.Client]
) -> None:
    made = client.create_key(["admin"])
    admin = acting_with(made.key)
    with pytest.raises(errors.NotFound, match="not its id") as caught:
        admin.revoke_key(made.key)
    assert made.key not in str(caught.value) and made.id not in str(caught.value)
    assert caught.value.message == (
        "that is an API key, not its id: give the id that `sqew keys list` shows")
    assert [k.id for k in admin.list_keys()] == [made.id]


def test_binding_a_key_to_a_missing_queue_is_queue_not_found(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound, match="queue 'jobs' does not exist"):
        client.create_key(["consume"], queue="jobs")
    assert client.list_keys() == []  # nothing stored


NAME_RULE = "name must be a string of 1-100 characters, none of them a control character"
BAD_REQUESTS: list[tuple[dict[str, Any], str, str]] = [
    ({"scopes": []}, "scopes", "scopes must be a list of 1 to 3 items"),
    ({"scopes": ["read"]}, "scopes[0]", "scopes[0] must be one of admin, consume, produce"),
    ({"scopes": ["produce", "Admin"]}, "scopes[1]",
     "scopes[1] must be one of admin, consume, produce"),
    ({"scopes": ["produce,consume"]}, "scopes[0]",
     "scopes[0] must be one of admin, consume, produce"),
    ({"scopes": ["admin", "admin"]}, "scopes", "scopes must not repeat a scope"),
    ({"scopes": ["admin", "consume", "produce", "admin"]}, "scopes",
     "scopes must be a list of 1 to 3 items"),
    ({"scopes": ["admin"], "name": ""}, "name", NAME_RULE),
    ({"scopes": ["admin"], "name": "n" * 101}, "name", NAME_RULE),
    ({"scopes": ["admin"], "name": "bell\x07"}, "name", NAME_RULE),
    ({"scopes": ["admin"], "name": "\x1b[2Jwiped"}, "name", NAME_RULE),
    ({"scopes": ["admin"], "name": "two\nlines"}, "name", NAME_RULE),
    ({"scopes": ["admin"], "queue": "no such/queue"}, "queue",
     "queue must be a string of 1-80 letters, digits, '_' or '-', starting with a letter or "
     "digit (it may end in '.fifo')"),
]


@pytest.mark.parametrize(("request_", "field", "message"), BAD_REQUESTS)
def test_bad_key_requests_are_validation_errors_naming_the_field(
    client: sqew.Client, request_: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        client.create_key(**request_)
    assert caught.value.message == message
    assert caught.value.details is not None and caught.value.details[0]["field"] == field
    assert client.list_keys() == []


def test_one_scope_may_be_given_as_a_string(admin: sqew.Client) -> None:
    assert admin.create_key("produce").scopes == ["produce"]


def test_deleting_a_queue_revokes_the_keys_bound_to_it(admin: sqew.Client) -> None:
    """A key bound to a removed queue must not reach a new queue that gets the same name."""
    admin.create_queue("jobs")
    bound = admin.create_key(["consume"], queue="jobs")
    kept = admin.create_key(["produce"])
    admin.delete_queue("jobs")
    listed = {k.id for k in admin.list_keys()}
    assert bound.id not in listed and kept.id in listed
    admin.create_queue("jobs")
    assert bound.id not in {k.id for k in admin.list_keys()}


def test_one_client_call_with_a_key_works_on_a_file_and_on_a_server(
    target: Target, client: sqew.Client
) -> None:
    # Before: Client("sqew.db", api_key=KEY) raised TypeError (hmac_secret was accepted), so a
    # program could not take its target from configuration and pass the key it was given.
    key = client.create_key(["admin"], name="configured").key
    where = getattr(target.client, "base_url", None) or target.client.target
    with sqew.Client(where, api_key=key, ca_cert=None) as configured:
        assert "configured" in {k.name for k in configured.list_keys()}
