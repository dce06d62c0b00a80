"""delivery claims follow leadership; endpoints remember failing; outbox scans stay flat

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

UNPROCESSED = sa.text("processed_at IS NULL")
PROCESSED = sa.text("processed_at IS NOT NULL")


def upgrade():
    with op.batch_alter_table('webhook_endpoints', schema=None) as batch_op:
        batch_op.add_column(sa.Column('failures', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.add_column(sa.Column('last_error', sa.String(length=500), nullable=False,
                                      server_default=''))
        batch_op.add_column(sa.Column('last_attempt_at', sa.DateTime(timezone=True),
                                      nullable=True))
        batch_op.add_column(sa.Column('retry_at', sa.DateTime(timezone=True), nullable=True))
    for table in ('webhook_deliveries', 'hook_deliveries'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('claim', sa.String(length=32), nullable=False,
                                          server_default=''))
            batch_op.add_column(sa.Column('claimed_term', sa.Integer(), nullable=False,
                                          server_default='0'))
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('started_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('plugin_states', schema=None) as batch_op:
        batch_op.add_column(sa.Column('paused_reason', sa.String(length=500), nullable=False,
                                      server_default=''))
    with op.batch_alter_table('outbox_events', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_pending')
        batch_op.create_index('ix_outbox_unprocessed', ['id'], unique=False,
                              postgresql_where=UNPROCESSED, sqlite_where=UNPROCESSED)
        batch_op.create_index('ix_outbox_processed_at', ['processed_at'], unique=False,
                              postgresql_where=PROCESSED, sqlite_where=PROCESSED)


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
