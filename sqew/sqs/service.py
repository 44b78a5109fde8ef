"""AWS's SQS service model, read from botocore at run time.

botocore ships the model every AWS SDK is generated from (the same JSON): its operations,
their input shapes (members, required members, types, enums) and the modelled exceptions. The
endpoint reads it here rather than copying tables out of it, so an action's input is checked
(``sqew.sqs.inputs``) against exactly what boto3 sends, and the error names are the ones boto3
knows.
"""

from __future__ import annotations

import functools

from botocore.loaders import Loader
from botocore.model import ServiceModel

TARGET_PREFIX = "AmazonSQS."
"""``X-Amz-Target`` of an SQS request: this prefix, then the action's name."""


@functools.cache
def model() -> ServiceModel:
    """The SQS service model of the installed botocore (read once per process; read-only)."""
    return ServiceModel(Loader().load_service_model("sqs", "service-2"), "sqs")


@functools.cache
def exceptions() -> frozenset[str]:
    """The names of the model's modelled exceptions (``QueueDoesNotExist``, …)."""
    return frozenset(s.name for s in model().error_shapes)


def operations() -> list[str]:
    """Every action of the model, by name."""
    return list(model().operation_names)


def enum(shape_name: str) -> list[str]:
    """The values of one of the model's enum shapes (``QueueAttributeName``, …)."""
    return list(model().shape_for(shape_name).enum)
