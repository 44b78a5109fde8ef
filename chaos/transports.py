"""The three ways a workload process reaches sqew, behind one small interface.

- ``local``: ``sqew.Client`` on the SQLite file (the engine in the process);
- ``http``: ``sqew.Client`` over HTTP to a ``sqew serve`` on 127.0.0.1;
- ``cli``: the ``sqew`` command line in a process per call, with ``--json``: each call is
  ``sqew``'s entry point run in a child forked from the workload process, which imported the
  command line once (``chaos.preload``), so a call costs a command's work, not its imports.

A call either answers, raises ``Refused`` (sqew answered with an error code: the operation
did not happen) or raises ``NoAnswer`` (no answer came: it may or may not have happened).
"""

from __future__ import annotations

import json
import random
from typing import Any, Protocol

import sqew
from chaos.suite import from_tests
from sqew import errors

CLI_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 30.0

DEFINITE = frozenset({"LeaseLost", "MessageNotFound", "NotFound", "QueueNotFound",
                      "ValidationError", "InvalidRequest", "QueueFull", "RateLimited",
                      "Overloaded"})
"""Error codes that say the operation was not done. Any other (``Unavailable``,
``InternalError``, a transport error) leaves it in doubt."""


class Refused(Exception):
    """sqew refused the call with ``code``: it did not happen."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class NoAnswer(Exception):
    """No answer came (server gone, command killed, timeout): the call is in doubt."""


Lease = dict[str, Any]
"""A leased message as journals keep it: ``id``, ``token``, ``attempts``,
``lease_expires_at``."""


class Transport(Protocol):
    """What a workload process calls; every method raises ``Refused`` or ``NoAnswer``."""

    def enqueue(self, queue: str, payload: Any, key: str) -> tuple[int, bool]:
        """Enqueue with an idempotency key: ``(id, duplicate)``."""

    def poll(self, queue: str, batch: int, wait_ms: int,
             visibility_ms: int | None) -> list[Lease]:
        """Lease up to ``batch`` messages."""

    def ack(self, queue: str, id: int, token: str) -> None:
        """Acknowledge one lease."""

    def nack(self, queue: str, id: int, token: str, delay_ms: int) -> None:
        """Release one lease for a retry."""

    def extend(self, queue: str, id: int, token: str, ms: int) -> int:
        """Extend one lease: its new ``lease_expires_at``."""

    def close(self) -> None:
        """Release what the transport holds."""


def _lease(m: Any) -> Lease:
    return {"id": m.id, "token": m.token, "attempts": m.attempts,
            "lease_expires_at": m.lease_expires_at}


class ClientTransport:
    """``local`` and ``http``: a ``sqew.Client`` on a file or a URL; several URLs
    (comma-separated: replicas of ``sqew serve``) are called in turn at random, so a lease
    taken through one may be settled through another."""

    def __init__(self, target: str) -> None:
        # (``Client(target)`` builds the local or the HTTP client: not abstract at run time)
        kwargs: dict[str, Any] = {"timeout": HTTP_TIMEOUT_S} if target.startswith("http") else {}
        urls = target.split(",") if target.startswith("http") else [target]
        self._clients = [sqew.Client(url, **kwargs) for url in urls]  # type: ignore[abstract]
        self._client = self._clients[0]
        self._rng = random.Random()

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if len(self._clients) > 1:  # the same method of another replica's client
            fn = getattr(self._rng.choice(self._clients), fn.__name__)
        try:
            return fn(*args, **kwargs)
        except errors.SqewError as exc:
            if exc.code in DEFINITE:
                raise Refused(exc.code, str(exc)) from exc
            raise NoAnswer(f"{exc.code}: {exc}") from exc

    def enqueue(self, queue: str, payload: Any, key: str) -> tuple[int, bool]:
        r = self._call(self._client.enqueue, queue, payload, idempotency_key=key)
        return int(r.message_id), bool(r.duplicate)

    def poll(self, queue: str, batch: int, wait_ms: int,
             visibility_ms: int | None) -> list[Lease]:
        got = self._call(self._client.poll, queue, batch=batch, wait_ms=wait_ms,
                         visibility_ms=visibility_ms)
        return [_lease(m) for m in got]

    def ack(self, queue: str, id: int, token: str) -> None:
        self._call(self._client.ack, queue, id, token)

    def nack(self, queue: str, id: int, token: str, delay_ms: int) -> None:
        self._call(self._client.nack, queue, id, token, delay_ms=delay_ms)

    def extend(self, queue: str, id: int, token: str, ms: int) -> int:
        return int(self._call(self._client.extend_lease, queue, id, token, ms).lease_expires_at)

    def close(self) -> None:
        for client in self._clients:
            client.close()


class CliTransport:
    """``cli``: one ``sqew --json`` command per call, on the file (``--db``) or a URL."""

    def __init__(self, target: str) -> None:
        flag = "--url" if target.startswith("http") else "--db"
        self._base = [flag, target, "--json"]
        self._forks = from_tests("forkserver")

    def _run(self, *args: str, wait_s: float = 0.0) -> Any:
        done = self._forks.run_forked([*self._base, *args], timeout=CLI_TIMEOUT_S + wait_s)
        if done is None:
            raise NoAnswer("the command timed out")
        returncode, out, err = done
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        body = _json_of(stdout) or _json_of(stderr)
        if returncode == 0 and body is not None:
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if returncode == 1 and isinstance(error, dict):
            code = str(error.get("code"))
            if code in DEFINITE:
                raise Refused(code, str(error.get("message")))
            raise NoAnswer(f"{code}: {error.get('message')}")
        raise NoAnswer(f"exit {returncode}: {stderr.strip()[-300:]}")

    def enqueue(self, queue: str, payload: Any, key: str) -> tuple[int, bool]:
        body = self._run("message", "enqueue", "--queue", queue, "--payload",
                         json.dumps(payload), "--idempotency-key", key)
        return int(body["message_id"]), bool(body["duplicate"])

    def poll(self, queue: str, batch: int, wait_ms: int,
             visibility_ms: int | None) -> list[Lease]:
        extra = [] if visibility_ms is None else ["--visibility-ms", str(visibility_ms)]
        body = self._run("message", "poll", "--queue", queue, "--batch", str(batch),
                         "--wait-ms", str(wait_ms), *extra, wait_s=wait_ms / 1000)
        return [{k: m[k] for k in ("id", "token", "attempts", "lease_expires_at")}
                for m in body["messages"]]

    def ack(self, queue: str, id: int, token: str) -> None:
        self._run("message", "ack", "--queue", queue, "--ids", f"{id}:{token}")

    def nack(self, queue: str, id: int, token: str, delay_ms: int) -> None:
        self._run("message", "nack", "--queue", queue, "--ids", f"{id}:{token}",
                  "--delay-ms", str(delay_ms))

    def extend(self, queue: str, id: int, token: str, ms: int) -> int:
        body = self._run("message", "extend-lease", "--queue", queue, "--id", f"{id}:{token}",
                         "--ms", str(ms))
        return int(body["lease_expires_at"])

    def close(self) -> None:
        """Nothing held between commands."""


def _json_of(text: str) -> Any:
    """The JSON document a command printed (its last line that parses), or None."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def open_transport(kind: str, target: str) -> Transport:
    """The transport of ``kind`` (``local``, ``http`` or ``cli``) on ``target`` (a file or URL)."""
    if kind == "cli":
        return CliTransport(target)
    return ClientTransport(target)
