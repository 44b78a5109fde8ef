"""message groups: a message's ordered group (FIFO queues of the SQS endpoint)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

``messages.group_id``: a message with a group is delivered only when no earlier message of its
group is left in its queue (docs/sqs.md, "FIFO queues"); null for every other message. The
index finds a message's earlier group mates.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('messages', sa.Column('group_id', sa.String(length=128), nullable=True))
    op.create_index('ix_messages_group', 'messages', ['queue_id', 'group_id', 'id'],
                    unique=False, sqlite_where=sa.text('group_id IS NOT NULL'),
                    postgresql_where=sa.text('group_id IS NOT NULL'))


def downgrade() -> None:
    op.drop_index('ix_messages_group', table_name='messages')
    with op.batch_alter_table('messages') as batch:
        batch.drop_column('group_id')
