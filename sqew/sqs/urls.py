"""Queue URLs and ARNs, and the context an action runs in (docs/sqs.md, "URLs and accounts").

A queue's URL is ``http://<the request's Host>/<account>/<name>`` and its ARN
``arn:aws:sqs:<region>:<account>:<name>``. A ``QueueUrl`` is resolved by its path alone, so a
URL made for another host (a client behind a proxy, a URL kept from another environment) or a
bare queue name reaches the same queue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from sqew import jsonlimits
from sqew.core import rules
from sqew.core.service import QueueService
from sqew.sqs.errors import invalid, no_queue

DEFAULT_ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Context:
    """What an action needs beside its input: the service, where the endpoint is reached
    (``base_url``: scheme and Host of the request), the account and region queues belong to,
    ``gone``: whether the client has left (a long poll then leases nothing), the server's
    ``max_json_depth`` (``sqew.sqs.envelope``), and, while API keys are enforced,
    ``authorize`` (raises ``AccessDenied`` unless the caller's key may run an action with its
    input, whatever the protocol: ``sqew.server.sqs_auth``) and ``reaches`` (the queues the
    key may see)."""

    service: QueueService
    base_url: str
    account: str = DEFAULT_ACCOUNT
    region: str = DEFAULT_REGION
    gone: Callable[[], bool] | None = None
    max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH
    authorize: Callable[[str, Any], None] | None = None
    reaches: Callable[[str], bool] | None = None

    def queue_url(self, name: str) -> str:
        """The URL of queue ``name``."""
        return f"{self.base_url}/{self.account}/{name}"

    def arn(self, name: str) -> str:
        """The ARN of queue ``name``."""
        return f"arn:aws:sqs:{self.region}:{self.account}:{name}"

    def name_of_arn(self, arn: str) -> str:
        """The queue name of an ARN of this endpoint's account and region.

        Raises:
            SqsError: ``InvalidParameterValue``: not such an ARN.
        """
        prefix = f"arn:aws:sqs:{self.region}:{self.account}:"
        if not arn.startswith(prefix) or not arn[len(prefix):]:
            raise invalid(f"Value {arn} for parameter deadLetterTargetArn is invalid. Reason: "
                          f"the ARN of a queue here starts with {prefix}.")
        return arn[len(prefix):]


def queue_name(queue_url: str) -> str:
    """The name of the queue a ``QueueUrl`` names: the last part of its path, after an
    optional account (any host; a bare name is a name).

    Raises:
        SqsError: ``QueueDoesNotExist``: no queue could have that name.
    """
    path = urlsplit(queue_url).path if "://" in queue_url else queue_url
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if len(parts) > 2 or not rules.is_queue_name(parts[-1]):
        raise no_queue()
    return parts[-1]
