"""a queue's named dead-letter target; a message's first lease time; message move tasks

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

``queues.dead_letter_target`` names the queue a queue dead-letters into (null: its own
``<name>.dlq``); ``messages.first_leased_at`` is when a message was first leased (null until
then); ``move_tasks`` holds the state of the SQS endpoint's message move tasks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('queues', sa.Column('dead_letter_target', sa.String(length=100), nullable=True))
    op.add_column('messages', sa.Column('first_leased_at', sa.BigInteger(), nullable=True))
    op.create_table(
        'move_tasks',
        sa.Column('handle', sa.String(length=64), nullable=False),
        sa.Column('source', sa.String(length=100), nullable=False),
        sa.Column('destination', sa.String(length=100), nullable=True),
        sa.Column('max_per_s', sa.Integer(), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('moved', sa.BigInteger(), nullable=False),
        sa.Column('to_move', sa.BigInteger(), nullable=False),
        sa.Column('started_at', sa.BigInteger(), nullable=False),
        sa.Column('stepped_at', sa.BigInteger(), nullable=False),
        sa.Column('failure_reason', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('handle'),
    )
    op.create_index('ix_move_tasks_source', 'move_tasks', ['source', 'started_at'])


def downgrade() -> None:
    op.drop_index('ix_move_tasks_source', table_name='move_tasks')
    op.drop_table('move_tasks')
    with op.batch_alter_table('messages') as batch:
        batch.drop_column('first_leased_at')
    with op.batch_alter_table('queues') as batch:
        batch.drop_column('dead_letter_target')
