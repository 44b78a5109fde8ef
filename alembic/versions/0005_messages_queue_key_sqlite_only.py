"""messages' key to their queue on SQLite only (PostgreSQL: kept by the writes)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

See ``sqew.backends.schema.MESSAGES_QUEUE_KEY``. On PostgreSQL the constraint is dropped (in
place, no table rewrite); on SQLite nothing changes (dropping it there would rebuild the
messages table, and its check costs nothing worth that).
"""

from __future__ import annotations

from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

_KEY = 'fk_messages_queue_id_queues'


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.drop_constraint(_KEY, 'messages', type_='foreignkey')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        # Checked against every message (a scan): messages of deleted queues, which the
        # writes never leave, would fail it.
        op.create_foreign_key(_KEY, 'messages', 'queues', ['queue_id'], ['id'],
                              ondelete='CASCADE')
