"""AddPermission and RemovePermission (docs/sqs.md, "Permissions"): statements of the queue's
``Policy`` attribute, kept in its SQS data (``sqew.core.sqs_data``) as the policy's JSON text,
as AWS writes it: one statement per label, ``Sid`` the label, the accounts as principals
(``arn:aws:iam::<account>:root``) and the actions as ``SQS:<Action>``. sqew stores the policy
and shows it; it does not decide requests by it (sqew's API keys and their scopes do).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from sqew import errors
from sqew.core.sqs_data import Data
from sqew.sqs import inputs
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]
SHARED = frozenset({
    "*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
    "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue",
})
"""The actions a queue's owner can grant to other accounts (AWS's list; the batch actions go
with their single ones)."""
MAX_ACTIONS = 7
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ACCOUNT = re.compile(r"[0-9]{12}")


def policy_of(data: Data) -> dict[str, Any] | None:
    """The queue's policy as an object (None: it has none)."""
    text = data.get("Policy")
    if not text:
        return None
    policy = msgspec.json.decode(text)
    return policy if isinstance(policy, dict) else None


def check_policy(text: str) -> str:
    """A ``Policy`` attribute's value: a JSON object, or ``""`` (no policy).

    Raises:
        SqsError: ``InvalidAttributeValue``: anything else.
    """
    if text == "":
        return text
    policy = inputs.json_object(text)
    if policy is None:
        raise SqsError("InvalidAttributeValue", "Invalid value for the parameter Policy: it "
                       "must be a JSON policy document (an object).")
    return text


async def add_permission(ctx: Context, p: Params) -> Params:
    """AddPermission: a statement that lets ``AWSAccountIds`` call ``Actions`` on the queue."""
    name = queue_name(p["QueueUrl"])
    label: str = p["Label"]
    accounts: list[str] = p["AWSAccountIds"]
    actions: list[str] = p["Actions"]
    if not _LABEL.fullmatch(label):
        raise invalid(f"Value {label} for parameter Label is invalid. Reason: Can only include "
                      "alphanumeric characters, hyphens, or underscores. 1 to 80 in length.")
    if not accounts:
        raise SqsError("MissingParameter", "The request must contain the parameter "
                       "AWSAccountIds.")
    if not actions:
        raise SqsError("MissingParameter", "The request must contain the parameter Actions.")
    if len(actions) > MAX_ACTIONS:
        raise SqsError("OverLimit", f"{len(actions)} Actions were found, maximum allowed is "
                       f"{MAX_ACTIONS}.")
    for action in actions:
        if action not in SHARED:
            raise invalid(f"Value SQS:{action} for parameter ActionName is invalid. Reason: "
                          "Only the queue owner is allowed to invoke this action.")
    for account in accounts:
        if not _ACCOUNT.fullmatch(account):
            raise invalid(f"Value {account} for parameter PrincipalId is invalid. Reason: "
                          "Unable to verify.")
    arn = ctx.arn(name)
    principals = [f"arn:aws:iam::{a}:root" for a in accounts]
    grants = [f"SQS:{a}" for a in actions]
    statement = {"Sid": label, "Effect": "Allow",
                 "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
                 "Action": grants[0] if len(grants) == 1 else grants, "Resource": arn}

    def change(data: Data) -> Data:
        policy = policy_of(data) or {"Version": "2012-10-17", "Id": f"{arn}/SQSDefaultPolicy",
                                     "Statement": []}
        statements = policy.get("Statement")
        statements = statements if isinstance(statements, list) else []
        if any(isinstance(s, dict) and s.get("Sid") == label for s in statements):
            # (sqew's own error: raised inside the core's transaction)
            raise errors.ValidationError(f"Value {label} for parameter Label is invalid. "
                                         "Reason: Already exists.")
        policy["Statement"] = [*statements, statement]
        return {**data, "Policy": msgspec.json.encode(policy).decode()}

    await ctx.service.change_sqs_data(name, change)
    return {}


async def remove_permission(ctx: Context, p: Params) -> Params:
    """RemovePermission: the statement of ``Label`` (the policy goes with its last one)."""
    name = queue_name(p["QueueUrl"])
    label: str = p["Label"]

    def change(data: Data) -> Data:
        policy = policy_of(data)
        statements = policy.get("Statement") if policy else None
        statements = statements if isinstance(statements, list) else []
        left = [s for s in statements if not (isinstance(s, dict) and s.get("Sid") == label)]
        if policy is None or len(left) == len(statements):
            raise errors.ValidationError(f"Value {label} for parameter Label is invalid. "
                                         "Reason: can't find label on existing policy.")
        rest = {k: v for k, v in data.items() if k != "Policy"}
        if not left:
            return rest
        return {**rest, "Policy": msgspec.json.encode({**policy, "Statement": left}).decode()}

    await ctx.service.change_sqs_data(name, change)
    return {}


ACTIONS = {"AddPermission": add_permission, "RemovePermission": remove_permission}
