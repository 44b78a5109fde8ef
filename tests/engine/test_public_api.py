"""The public Python API: ``sqew.__all__``, ``sqew.Client`` dispatch, and the error codes
of docs/rest.md."""

from __future__ import annotations
import __future__

import importlib
import types
from pathlib import Path

import pytest

import sqew
from sqew import errors
from sqew.client.http import HttpClient

# docs/rest.md, "Errors": every error code and its HTTP status (Overloaded may be either).
ERROR_CODES: dict[str, set[int]] = {
    "InvalidRequest": {400},
    "ValidationError": {400},
    "Unauthorized": {401},
    "InvalidSignature": {401},
    "Forbidden": {403},
    "QueueNotFound": {404},
    "MessageNotFound": {404},
    "NotFound": {404},
    "MethodNotAllowed": {405},
    "QueueExists": {409},
    "LeaseLost": {409},
    "PayloadTooLarge": {413},
    "QueueFull": {429},
    "RateLimited": {429},
    "Overloaded": {429, 503},
    "InternalError": {500},
    "Unavailable": {503},
}


@pytest.mark.parametrize("name", sqew.__all__)
def test_every_name_in_all_is_importable(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from sqew import {name}", namespace)  # the statement a user writes
    assert namespace[name] is getattr(sqew, name)


def test_all_has_no_duplicates_and_covers_public_non_module_names() -> None:
    assert len(sqew.__all__) == len(set(sqew.__all__))
    public = {
        n for n, v in vars(sqew).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType | __future__._Feature)
    }
    assert public <= set(sqew.__all__), f"public but not in __all__: {public - set(sqew.__all__)}"


def test_client_on_a_path_is_a_local_client(tmp_path: Path) -> None:
    client = sqew.Client(tmp_path / "api.db")
    try:
        assert isinstance(client, sqew.LocalClient)
        assert isinstance(client, sqew.Client)
    finally:
        client.close()


def test_client_on_a_sqlite_url_is_a_local_client(tmp_path: Path) -> None:
    client = sqew.Client(f"sqlite:///{tmp_path / 'api.db'}")
    try:
        assert isinstance(client, sqew.LocalClient)
    finally:
        client.close()


@pytest.mark.parametrize("url", ["http://127.0.0.1:1", "https://127.0.0.1:1/"])
def test_client_on_a_url_is_an_http_client_and_does_not_connect(url: str) -> None:
    # Nothing listens on port 1: constructing must not touch the network.
    client = sqew.Client(url)
    try:
        assert isinstance(client, HttpClient)
        assert isinstance(client, sqew.Client)
    finally:
        client.close()


def test_an_http_client_fails_with_a_sqew_error_when_nothing_listens() -> None:
    client = sqew.Client("http://127.0.0.1:1", timeout=5)
    try:
        with pytest.raises(errors.SqewError):
            client.list_queues()
    finally:
        client.close()


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_spec_error_code_maps_to_its_class(code: str) -> None:
    cls = errors.by_code(code)
    assert issubclass(cls, sqew.SqewError)
    assert cls.code == code
    assert cls.status in ERROR_CODES[code]
    assert getattr(errors, code) is cls
    err = cls("boom")
    assert isinstance(err, Exception)
    assert err.to_dict() == {"error": {"code": code, "message": "boom"}}


def test_every_error_class_is_a_spec_code() -> None:
    module = importlib.import_module("sqew.errors")
    classes = {
        v.code for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, errors.SqewError) and v is not errors.SqewError
    }
    assert classes == set(ERROR_CODES)


def test_an_unknown_code_maps_to_the_base_error() -> None:
    assert errors.by_code("NoSuchCode") is errors.SqewError


@pytest.mark.parametrize("target", [":memory:", "sqlite:///:memory:"])
def test_an_in_memory_database_is_refused_and_creates_nothing(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(sqew.errors.ValidationError, match="in-memory"):
        sqew.Client(target)
    assert list(tmp_path.iterdir()) == []
