"""a queue's paused delivery

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

``queues.paused``: while true, polls of the queue claim nothing (enqueues go on); see
docs/rest.md#pause-and-resume.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('queues', sa.Column('paused', sa.Boolean(), nullable=False,
                                      server_default=sa.text('false')))


def downgrade() -> None:
    with op.batch_alter_table('queues') as batch:
        batch.drop_column('paused')
