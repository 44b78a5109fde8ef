"""Pure rules of SPEC §1: defaults, ranges across fields, backoff, signatures. No I/O."""

from __future__ import annotations

import hashlib
import hmac
import random

from sqew import errors, models

DEFAULTS: dict[str, object] = dict(models.SETTING_DEFAULTS)
"""Each queue setting's default, as ``models.QueueSettings`` declares it."""

DLQ_SUFFIX = ".dlq"


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
    """An HMAC secret must be at least 16 bytes of UTF-8 (SPEC §1)."""
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


def sign(secret: str, payload: str) -> str:
    """Hex HMAC-SHA256 of a payload's text under a queue's secret."""
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def rate_limit(
    tokens: float, at_ms: int, rate: float, now: int, wanted: int
) -> tuple[float, float | None]:
    """Token bucket for ``rate_limit_per_s`` (burst = one second's worth, at least 1).

    Returns the bucket's new level and None when ``wanted`` may pass (a batch larger than the
    burst passes on a full bucket and leaves it in debt), else the level and retry-after seconds.
    """
    burst = max(rate, 1.0)
    level = burst if at_ms == 0 else min(burst, tokens + (now - at_ms) / 1000.0 * rate)
    need = min(float(wanted), burst)
    if level + 1e-9 < need:
        return level, (need - level) / rate
    return level - wanted, None
