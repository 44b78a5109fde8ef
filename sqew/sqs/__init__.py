"""The AWS SQS endpoint's adapter (docs/sqs.md): AWS's JSON 1.0 protocol and SQS actions over
``QueueService``. The only package of sqew that speaks AWS words; the server routes to it
(``sqew.server.routes.sqs``)."""

from __future__ import annotations
