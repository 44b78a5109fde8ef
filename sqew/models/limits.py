"""The ranges and patterns of the wire format (docs/rest.md), each declared once.

Numbers and regular expressions only: the field types (``sqew.models.fields``) and the request
models put them in ``Meta`` constraints, so the server, the clients, the CLI's messages and the
OpenAPI document all read the same values.
"""

from __future__ import annotations

import sys

# --- ranges -------------------------------------------------------------------------------------
MAX_BATCH_ENQUEUE = 1000
MAX_POLL_BATCH = 100
MAX_WAIT_MS = 20000
MAX_STREAM_IN_FLIGHT = 1000
"""The most unacknowledged messages one stream may hold (``max_in_flight``)."""
DEFAULT_STREAM_IN_FLIGHT = 10
MAX_TTL_MS = 1_209_600_000
MIN_TTL_MS = 1000
MAX_VISIBILITY_MS = 43_200_000
"""The longest lease (12 h): the ``visibility_ms`` setting, a poll's override and the ``ms`` of
``extend-lease``."""
MAX_ATTEMPTS = 1000
MAX_BACKOFF_BASE_MS = 3_600_000
MAX_BACKOFF_MS = 86_400_000
MIN_RETENTION_MS = 60_000
MIN_DEDUP_WINDOW_MS = 1000
MAX_DEDUP_WINDOW_MS = 604_800_000
MAX_PAYLOAD_BYTES = 1_048_576
MIN_RATE_LIMIT_PER_S = 0.00001
"""The smallest rate limit other than 0 (off): about one message a day. Below it a token bucket
would ask callers to wait for ages (or for longer than a float can say)."""
HMAC_SECRET_MIN_BYTES = 16
"""The shortest ``hmac_secret``, in bytes of UTF-8 (``rules.check_hmac_secret``)."""
HMAC_SECRET_MAX_LENGTH = 1024
"""The longest ``hmac_secret``, in characters."""
MAX_INT64 = 2**63 - 1
"""The largest integer a database column holds (signed 64-bit): every unbounded integer of a
request is capped here, so a larger one is a ValidationError rather than an overflow inside the
database driver."""
MAX_FLOAT = sys.float_info.max
"""Any finite number: infinity would be stored, and then written as JSON null."""
MAX_ID = MAX_INT64
"""The largest message id."""
MAX_SCAN_LIMIT = 1000
TRACESTATE_MAX = 512
KEY_NAME_MAX = 100

# --- patterns -----------------------------------------------------------------------------------
# `$` in Python's re also matches before a final newline; this lookahead ends the string in both
# Python and the ECMA-262 dialect of the OpenAPI schema.
END_OF_TEXT = r"(?![\s\S])"
# (An SQS FIFO queue's name ends in `.fifo`, within the 80 characters: docs/sqs.md.)
QUEUE_NAME_PATTERN = (
    r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,79}|[A-Za-z0-9_-]{0,74}\.fifo)" + END_OF_TEXT
)
IDEMPOTENCY_KEY_PATTERN = r"^[\x20-\x7e]+" + END_OF_TEXT
# W3C Trace Context (docs/rest.md "Trace context"): a traceparent of version 00's form, neither
# id all zeros (invalid by the W3C rules), version ff forbidden; a tracestate of printable ASCII.
TRACEPARENT_PATTERN = (
    r"^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}" + END_OF_TEXT
)
TRACESTATE_PATTERN = r"^[\x20-\x7e]*" + END_OF_TEXT
# X-Sqew-Signature (docs/security.md): t=<unix seconds, no leading zero, at most 12 digits>, then
# 1 to 8 v1=<64 lower-case hex digits>, comma-separated without spaces.
SIGNATURE_MAX_V1 = 8
SIGNATURE_PATTERN = (
    r"^t=(0|[1-9][0-9]{0,11})(,v1=[0-9a-f]{64}){1," + str(SIGNATURE_MAX_V1) + "}" + END_OF_TEXT
)
# No control characters: `keys list` prints names to a terminal, where ESC or BEL would act.
KEY_NAME_PATTERN = r"^[^\x00-\x1f\x7f]{1," + str(KEY_NAME_MAX) + "}" + END_OF_TEXT

PATTERN_HINTS = {
    QUEUE_NAME_PATTERN: (
        "1-80 letters, digits, '_' or '-', starting with a letter or digit (it may end in "
        "'.fifo')"
    ),
    IDEMPOTENCY_KEY_PATTERN: "printable ASCII",
    TRACEPARENT_PATTERN: (
        "a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lower case, "
        "ids not all zeros"
    ),
    TRACESTATE_PATTERN: "printable ASCII (a W3C tracestate)",
    KEY_NAME_PATTERN: "1-100 characters, none of them a control character",
}
"""What each pattern means, for error messages people can act on."""
