"""``sqew.Relay``: a ``sqew.Worker`` whose handler POSTs each message to a webhook
(docs/consumers.md, "The relay").

The Worker polls, holds leases (heartbeats), settles in batches and drains on SIGTERM; the
relay only turns a message into a request (``delivery``) and the answer into the handler's
outcome: a 2xx returns (ack); 429, 5xx, a timeout or a broken exchange raise ``Retry`` (a
nack, after the answer's ``Retry-After`` when it gives one, else the queue's backoff); any
other status raises ``Retry`` with the status as its error (the DLQ after ``max_attempts``).

A request that never reached the receiver (it refused the connection, or none could be made
in time) is not the message's fault: the handler keeps its lease (heartbeats) and tries again
after a pause growing from 0.1 s to 30 s. While the receiver is away every slot waits so, and
a slot frees only when its message is settled, so the relay leases nothing new: an outage
costs each held message one attempt, however long it lasts.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from urllib.parse import urlsplit

import httpx

from sqew import __version__, errors, models
from sqew.client import tls
from sqew.client.base import Client
from sqew.relay import delivery
from sqew.worker import Retry, Worker

log = logging.getLogger("sqew.relay")

MAX_PAUSE_S = 30.0
"""The longest pause between two tries of a receiver that cannot be reached."""


class Relay:
    """Delivers ``queue``'s messages to ``url`` as HTTP POSTs, through ``client``.

    Args:
        client: any ``sqew.Client`` (a database file, PostgreSQL, a server).
        queue: the queue to relay.
        url: the receiver, ``http://`` or ``https://``.
        concurrency: requests under way at once (1 to 1000): the Worker's handler threads,
            and the size of the one keep-alive connection pool.
        timeout_s: how long one request may take to connect, to send, and between the bytes
            of the answer; past it the message is nacked (``timed out``).
        hmac_secret: the queue's ``hmac_secret``: on a queue that has one, each delivery is
            signed with it (``X-Sqew-Signature``), and a message whose own signature does not
            match it is rejected (DLQ) rather than delivered. Required for such a queue.
        ca_cert: a PEM file of the CA certificate(s) to verify an ``https://`` receiver
            against (default: the system's CAs). Certificates are always verified.
        wait_ms, visibility_ms, drain_timeout_s, handle_signals: as ``sqew.Worker``'s.

    Attributes:
        worker: the ``Worker`` underneath (its counts: ``processed`` are the deliveries
            acked, ``failed`` those nacked, ``rejected`` those dead-lettered at once).
        connection_retries: tries that found the receiver unreachable (each retried in place).
    """

    def __init__(
        self, client: Client, queue: str, url: str, *, concurrency: int = 1,
        timeout_s: float = 10.0, hmac_secret: str | None = None,
        ca_cert: str | os.PathLike[str] | None = None, wait_ms: int = 1000,
        visibility_ms: int | None = None, drain_timeout_s: float = 30.0,
        handle_signals: bool = True,
    ) -> None:
        check_url(url)
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, not {timeout_s!r}")
        self.url = url
        self.timeout_s = timeout_s
        self.hmac_secret = hmac_secret or None
        self.connection_retries = 0
        self.worker = Worker(client, queue, self._deliver, concurrency=concurrency,
                             wait_ms=wait_ms, visibility_ms=visibility_ms,
                             drain_timeout_s=drain_timeout_s, handle_signals=handle_signals)
        self._unsigned: str | None = None
        self._counts = threading.Lock()
        # One pool for every thread, its connections kept alive between deliveries; HTTP/1.1
        # (httpx's default), no redirects followed (a 3xx is an answer like any other).
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=concurrency,
                                max_keepalive_connections=concurrency),
            verify=tls.default_context() if ca_cert is None else tls.private_ca(os.fspath(ca_cert)),
            headers={"user-agent": f"sqew-relay/{__version__}"},
        )

    @property
    def queue(self) -> str:
        """The queue relayed."""
        return self.worker.queue

    def stop(self) -> None:
        """As ``Worker.stop``: stop polling, let the deliveries under way end, return."""
        self.worker.stop()

    def run(self) -> None:
        """Relay until ``stop()`` (or SIGINT/SIGTERM), then drain and return.

        Raises:
            SqewError: as ``Worker.run``; ``ValidationError`` when the queue signs its
                messages and the relay has no ``hmac_secret`` (it stops at the first one).
        """
        try:
            self.worker.client.get_queue(self.queue)  # (a queue that is not there: no log)
            log.info("relaying %s to %s", self.queue, self.url)
            self.worker.run()
        finally:
            self._http.close()
        if self._unsigned is not None:
            raise errors.ValidationError(self._unsigned)

    def _deliver(self, m: models.LeasedMessage) -> None:
        body = delivery.body_of(m)
        try:
            headers = delivery.request_headers(m, body, self.hmac_secret)
        except delivery.Unsigned as exc:
            self._unsigned = str(exc)
            self.worker.stop()
            raise Retry(str(exc)) from None
        response = self._post(m, body, headers)
        status = response.status_code
        if 200 <= status < 300:
            return
        error = f"HTTP {status} {response.reason_phrase}".rstrip()
        if status == 429 or status >= 500:
            raise Retry(error, delivery.retry_after_ms(response))
        raise Retry(error)

    def _post(self, m: models.LeasedMessage, body: bytes,
              headers: dict[str, str]) -> httpx.Response:
        pause = 0.1
        while True:
            try:
                return self._http.post(self.url, content=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Nothing reached the receiver: try again under the same lease.
                why = f"{type(exc).__name__}: {exc}"
                if self.worker.stopping:
                    raise Retry(f"cannot reach {self.url}: {why}") from None
                with self._counts:
                    self.connection_retries += 1
                log.warning("message %d: cannot reach %s (again in %.1f s): %s", m.id,
                            self.url, pause, why)
                self._sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_S)
            except httpx.TimeoutException:
                raise Retry(f"timed out: no answer within {self.timeout_s:g} s") from None
            except httpx.HTTPError as exc:  # the exchange broke after the request went out
                raise Retry(f"{type(exc).__name__}: {exc}") from None

    def _sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less once the relay stops."""
        end = time.monotonic() + seconds
        while not self.worker.stopping and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))


def check_url(url: str) -> None:
    """Raise ``ValueError`` unless ``url`` is an ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {url!r}")
