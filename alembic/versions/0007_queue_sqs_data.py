"""the SQS endpoint's data of a queue (tags, queue-level delay and receive wait)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

``queues.sqs`` keeps, as a JSON object, what the SQS endpoint (docs/sqs.md) keeps of a queue
that sqew's own settings have no field for; null when there is nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('queues', sa.Column('sqs', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('queues') as batch:
        batch.drop_column('sqs')
