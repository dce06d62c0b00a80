"""delivery claims follow leadership; endpoints remember failing; outbox scans stay flat

Each table's columns in one short transaction of its own; the outbox's new indexes built
concurrently before its old one is dropped, concurrently too (issue 35).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

"""
from alembic import op
import sqlalchemy as sa

from webapp.ops.release import steps


# revision identifiers, used by Alembic.
revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

UNPROCESSED = sa.text("processed_at IS NULL")
PROCESSED = sa.text("processed_at IS NOT NULL")


def upgrade():
    steps.add_columns(
        'webhook_endpoints',
        sa.Column('failures', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('last_error', sa.String(length=500), nullable=False, server_default=''),
        sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True))
    for table in ('webhook_deliveries', 'hook_deliveries'):
        steps.add_columns(
            table,
            sa.Column('claim', sa.String(length=32), nullable=False, server_default=''),
            sa.Column('claimed_term', sa.Integer(), nullable=False, server_default='0'))
    steps.add_columns('hook_deliveries',
                      sa.Column('started_at', sa.DateTime(timezone=True), nullable=True))
    steps.add_columns('plugin_states', sa.Column('paused_reason', sa.String(length=500),
                                                 nullable=False, server_default=''))
    steps.create_index('ix_outbox_unprocessed', 'outbox_events', ['id'], where=UNPROCESSED)
    steps.create_index('ix_outbox_processed_at', 'outbox_events', ['processed_at'],
                       where=PROCESSED)
    steps.drop_index('ix_outbox_pending', 'outbox_events')


def downgrade():
    with op.batch_alter_table('outbox_events', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_processed_at', postgresql_where=PROCESSED,
                            sqlite_where=PROCESSED)
        batch_op.drop_index('ix_outbox_unprocessed', postgresql_where=UNPROCESSED,
                            sqlite_where=UNPROCESSED)
        batch_op.create_index('ix_outbox_pending', ['id', 'processed_at'], unique=False)
    with op.batch_alter_table('plugin_states', schema=None) as batch_op:
        batch_op.drop_column('paused_reason')
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.drop_column('started_at')
    for table in ('hook_deliveries', 'webhook_deliveries'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('claimed_term')
            batch_op.drop_column('claim')
    with op.batch_alter_table('webhook_endpoints', schema=None) as batch_op:
        batch_op.drop_column('retry_at')
        batch_op.drop_column('last_attempt_at')
        batch_op.drop_column('last_error')
        batch_op.drop_column('failures')
