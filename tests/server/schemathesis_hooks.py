"""Hooks of the suite's schemathesis run (``test_openapi.py``), loaded by ``st`` itself.

What the document cannot say to a generator, and only that:

- **Documented refusals.** docs/openapi.yaml gives every rule the server checks on one value
  (ranges, lengths, patterns, ``uniqueItems``); a few rules relate a value to another field,
  to a header, or to the queue's stored settings, which JSON Schema cannot express. Each
  operation's description names them and documents the answer (a 400 ``ValidationError``, a
  413 ``PayloadTooLarge``). A schema-valid request refused that way is the right answer, not a
  "schema-valid request rejected" failure: ``filter_failure`` drops exactly those, after
  checking from the request (where the request alone decides) that the rule named in the
  answer applies, and notes each in the file ``SQEW_ST_REFUSALS`` names. Any other refusal
  of a schema-valid request stays a failure.
- **Bounded waits.** A generated long poll on a queue that exists waits up to its
  ``wait_ms`` (20 s) for a message: ``before_call`` shortens a valid wait to ``WAIT_MS``, so a
  run's time goes to requests rather than to waiting.
- **Status counts.** When ``SQEW_ST_STATUSES`` names a file, ``after_call`` appends each
  answer's status to it (``./scripts/chaos fuzz`` counts the 5xx answers of its runs).
- **The run's own key.** The stateful phase follows ``GET /keys`` to ``DELETE /keys/{id}``;
  revoking the admin key the run authenticates with would turn every later answer into a 401.
  ``filter_case`` leaves that one request out (``SQEW_ST_KEY_ID``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis

DEFAULT_BACKOFF_BASE_MS = 1000
DEFAULT_BACKOFF_MAX_MS = 900_000
WAIT_MS = 50
HMAC_SECRET_MIN_BYTES = 16


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Shorten a poll's valid ``wait_ms`` to ``WAIT_MS`` (in every phase, as it is sent)."""
    query = case.query if isinstance(case.query, dict) else {}
    wait = query.get("wait_ms")
    if isinstance(wait, str) and wait.isdigit():  # the coverage phase writes numbers as text
        wait = int(wait)
    if _operation_id(case) == "poll" and isinstance(wait, int) and WAIT_MS < wait <= 20_000:
        case.query = {**query, "wait_ms": WAIT_MS}


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Note the answer's status in ``SQEW_ST_STATUSES``, if set."""
    path = os.environ.get("SQEW_ST_STATUSES")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{response.status_code}\n")


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    """Never revoke the key the run authenticates with."""
    if _operation_id(case) != "revokeKey":
        return True
    return str(case.path_parameters.get("id")) != os.environ.get("SQEW_ST_KEY_ID")


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but a documented refusal or a documented secret's length."""
    code = getattr(failure, "code", None)
    if code == "ST201":  # "Schema-violating request accepted"
        why = _secret_in_bytes(case)
    elif code == "ST202":  # "Schema-valid request rejected"
        why = documented_refusal(case, response)
    else:
        return True
    log = os.environ.get("SQEW_ST_REFUSALS")
    if why is not None and log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{_operation_id(case)}: {why}\n")
    return why is None


def documented_refusal(case: Any, response: Any) -> str | None:
    """The documented rule that refused this schema-valid request, or None if none did."""
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    code = error.get("code")
    fields = {d.get("field") for d in error.get("details") or [] if isinstance(d, dict)}
    operation = _operation_id(case)
    body = case.body if isinstance(case.body, dict) else {}
    queue = str((case.path_parameters or {}).get("q", ""))
    if code == "ValidationError" and queue.endswith(".dlq") and (
        "dead-letter queue" in error.get("message", "")
    ):
        return "the operation takes a queue, and the path names a dead-letter queue"
    if operation == "createQueue" and fields == {"backoff_max_ms"}:
        base = body.get("backoff_base_ms", DEFAULT_BACKOFF_BASE_MS)
        highest = body.get("backoff_max_ms", DEFAULT_BACKOFF_MAX_MS)
        return "backoff_max_ms < backoff_base_ms" if highest < base else None
    if operation == "updateQueue" and fields == {"backoff_max_ms"}:
        if "backoff_max_ms" in body and "backoff_base_ms" in body:
            below = body["backoff_max_ms"] < body["backoff_base_ms"]
            return "backoff_max_ms < backoff_base_ms" if below else None
        return "backoff_max_ms < backoff_base_ms (with the queue's stored value)"
    if operation == "enqueue":
        return _enqueue_refusal(case, body, code, fields)
    return None


def _enqueue_refusal(case: Any, body: dict[str, Any], code: str, fields: set[Any]) -> str | None:
    if code == "PayloadTooLarge":
        return "a payload over the queue's max_payload_bytes"
    if code != "ValidationError":
        return None
    headers = {str(k).lower(): v for k, v in (case.headers or {}).items()}
    key = headers.get("idempotency-key")
    if key is not None and "messages" in body and fields == {"Idempotency-Key"}:
        return "the Idempotency-Key header with a batch"
    if key is not None and fields == {"idempotency_key"}:
        differs = body.get("idempotency_key") not in (None, key)
        return "the Idempotency-Key header and idempotency_key differ" if differs else None
    if fields == {"delay_ms"}:
        messages = body.get("messages", [body])
        for m in messages if isinstance(messages, list) else []:
            ttl = m.get("ttl_ms") if isinstance(m, dict) else None
            if ttl is not None and m.get("delay_ms", 0) >= ttl:
                return "delay_ms >= ttl_ms"
        return "delay_ms beyond the queue's retention_ms (its stored value)"
    return None


def _secret_in_bytes(case: Any) -> str | None:
    """Why an accepted settings body was right to be accepted: its ``hmac_secret`` has fewer
    than 16 characters but at least 16 bytes (what the server counts), or None."""
    body = case.body if isinstance(case.body, dict) else {}
    secret = body.get("hmac_secret")
    if _operation_id(case) not in ("createQueue", "updateQueue") or not isinstance(secret, str):
        return None
    if len(secret) < HMAC_SECRET_MIN_BYTES <= len(secret.encode("utf-8", "surrogatepass")):
        return "an hmac_secret of fewer than 16 characters and at least 16 bytes"
    return None


def _operation_id(holder: Any) -> str | None:
    """The operation id of a case or a hook's context (both have the ``operation``)."""
    operation = getattr(holder, "operation", None)
    operation_id = getattr(getattr(operation, "definition", None), "raw", {}).get("operationId")
    return operation_id if isinstance(operation_id, str) else None
