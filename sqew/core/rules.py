"""Pure rules of docs/rest.md: defaults, ranges across fields, backoff. No I/O."""

from __future__ import annotations

import random
import re

from sqew import errors, models, queue_settings

DEFAULTS: dict[str, object] = dict(queue_settings.SETTING_DEFAULTS)
"""Each queue setting's default, as ``models.QueueSettings`` declares it."""

DLQ_SUFFIX = ".dlq"


_QUEUE_NAME = re.compile(models.QUEUE_NAME_PATTERN)


def is_queue_name(name: str) -> bool:
    """Whether ``name`` can name a queue: one a user may create (``models.QUEUE_NAME_PATTERN``)
    or its dead-letter queue (``<name>.dlq``)."""
    return _QUEUE_NAME.match(queue_of(name)) is not None


def queue_of(name: str) -> str:
    """The queue ``name`` belongs to: ``q`` for its dead-letter queue ``q.dlq``, else itself."""
    return name[: -len(DLQ_SUFFIX)] if is_dlq(name) else name


def is_dlq(queue: str) -> bool:
    """Whether ``queue`` names a dead-letter queue (``q.dlq``: no other name has a dot)."""
    return queue.endswith(DLQ_SUFFIX)


def dlq_name(queue: str) -> str:
    """The name of a queue's dead-letter queue."""
    return queue + DLQ_SUFFIX


def check_backoff(base_ms: int, max_ms: int) -> None:
    """``backoff_max_ms`` must be at least ``backoff_base_ms``."""
    if max_ms < base_ms:
        raise errors.ValidationError(
            "backoff_max_ms must be >= backoff_base_ms",
            details=[{"field": "backoff_max_ms", "message": "must be >= backoff_base_ms"}],
        )


def check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    """Raise ValidationError unless ``low <= value <= high``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
        high is not None and value > high
    ):
        raise range_error(name, low, high)


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise ValidationError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise errors.ValidationError(
            f"{name} must be one of {', '.join(choices)}",
            details=[{"field": name, "message": f"not one of {', '.join(choices)}"}])


def range_error(name: str, low: int, high: int | None = None) -> errors.ValidationError:
    """The error for an integer parameter ``name`` outside ``low``…``high`` (or not an integer).

    The wording of ``QueueService``'s own range checks, so a bad query or path parameter reads
    the same from a server as from a local client.
    """
    bound = f"between {low} and {high}" if high is not None else f">= {low}"
    return errors.ValidationError(
        f"{name} must be an integer {bound}",
        details=[{"field": name, "message": f"must be an integer {bound}"}],
    )


HMAC_SECRET_MIN_BYTES = models.HMAC_SECRET_MIN_BYTES


def check_hmac_secret(secret: str | None) -> None:
    """An HMAC secret must be at least 16 bytes of UTF-8 (docs/rest.md, "Queue settings")."""
    if secret is not None and len(secret.encode()) < HMAC_SECRET_MIN_BYTES:
        raise errors.ValidationError(
            "hmac_secret must be at least 16 bytes",
            details=[{"field": "hmac_secret", "message": "must be at least 16 bytes"}],
        )


def backoff_ms(attempts: int, base_ms: int, max_ms: int, rng: random.Random | None = None) -> int:
    """Retry delay after the ``attempts``-th delivery: ``min(max, base * 2^(attempts-1))`` + jitter.

    The jitter is up to 10 % of the delay, so retries of many messages spread out.
    """
    exponent = max(attempts - 1, 0)
    delay = max_ms if exponent >= 64 else min(max_ms, base_ms * (1 << exponent))
    jitter = (rng or random).random() * 0.1 * delay
    return int(delay + jitter)


MAX_RETRY_AFTER_S = 86_400.0
"""The longest wait a rate-limited enqueue is told to make (one day): a slow bucket, or a rate
stored before ``models.MIN_RATE_LIMIT_PER_S`` existed, must not produce an absurd or infinite
``Retry-After``."""
MIN_RETRY_AFTER_S = 0.001
CLOCK_STEP_MS = 1000
"""How far before the bucket's last draw a time may read and still count as "no time passed"."""


def rate_limit(
    tokens: float, at_ms: int, rate: float, now: int, wanted: int
) -> tuple[float, float | None]:
    """Token bucket for ``rate_limit_per_s`` (burst = one second's worth, at least 1).

    Returns the bucket's new level and None when ``wanted`` may pass (a batch larger than the
    burst passes on a full bucket and leaves it in debt), else the level and retry-after seconds
    (between ``MIN_RETRY_AFTER_S`` and ``MAX_RETRY_AFTER_S``).

    The time since the last draw is clamped: a ``now`` slightly before ``at_ms`` (read before
    another writer committed) refills nothing, and one more than ``CLOCK_STEP_MS`` before it
    (the clock stepped back) leaves that time unknown, so the bucket counts as full rather than
    waiting for the clock to catch up: a step backwards never blocks a queue (at worst it
    allows one extra burst).
    """
    burst = max(rate, 1.0)
    elapsed_ms = now - at_ms
    if at_ms == 0 or elapsed_ms < -CLOCK_STEP_MS:
        level = burst
    else:
        level = min(burst, tokens + max(elapsed_ms, 0) / 1000.0 * rate)
    need = min(float(wanted), burst)
    if level + 1e-9 < need:
        wait = (need - level) / rate  # inf, never an error, for a denormal rate
        return level, min(max(wait, MIN_RETRY_AFTER_S), MAX_RETRY_AFTER_S)
    return level - wanted, None
