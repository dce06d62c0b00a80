"""plugins

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade():
    op.create_table('plugin_states',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('plugin_documents',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('content_type', sa.String(length=100), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('timers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('plugin', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('default_key', sa.String(length=64), nullable=True),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('every', sa.Integer(), nullable=True),
    sa.Column('unit', sa.String(length=8), nullable=True),
    sa.Column('cron', sa.String(length=120), nullable=True),
    sa.Column('run_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('start_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('timezone', sa.String(length=64), nullable=False),
    sa.Column('paused', sa.Boolean(), nullable=False),
    sa.Column('paused_reason', sa.String(length=500), nullable=False),
    sa.Column('misfire', sa.String(length=16), nullable=False),
    sa.Column('grace_seconds', sa.Integer(), nullable=False),
    sa.Column('max_runtime_seconds', sa.Integer(), nullable=False),
    sa.Column('max_failures', sa.Integer(), nullable=False),
    sa.Column('consecutive_failures', sa.Integer(), nullable=False),
    sa.Column('next_run_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plugin', 'default_key', name='uq_timers_plugin_default_key')
    )
    with op.batch_alter_table('timers', schema=None) as batch_op:
        batch_op.create_index('ix_timers_next_run_at', ['next_run_at'], unique=False)

    op.create_table('timer_runs',
    sa.Column('id', BigId, nullable=False),
    sa.Column('timer_id', sa.Integer(), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('queued_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('duration_seconds', sa.Float(), nullable=True),
    sa.Column('result', sa.String(length=500), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('instance', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['timer_id'], ['timers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('timer_id', 'scheduled_for', name='uq_timer_runs_slot')
    )
    with op.batch_alter_table('timer_runs', schema=None) as batch_op:
        batch_op.create_index('ix_timer_runs_status', ['status'], unique=False)

    op.create_table('hook_deliveries',
    sa.Column('id', BigId, nullable=False),
    sa.Column('plugin', sa.String(length=64), nullable=False),
    sa.Column('hook', sa.String(length=32), nullable=False),
    sa.Column('event_id', BigId, nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('instance', sa.String(length=200), nullable=False),
    sa.Column('last_error', sa.String(length=500), nullable=False),
    sa.Column('done_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['outbox_events.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plugin', 'event_id', name='uq_hook_deliveries_plugin_event')
    )
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_hook_deliveries_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_hook_deliveries_event_id'), ['event_id'], unique=False)

    op.create_table('webhook_endpoints',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('url', sa.String(length=2000), nullable=False),
    sa.Column('description', sa.String(length=200), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('secret', sa.String(length=200), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('webhook_deliveries',
    sa.Column('id', BigId, nullable=False),
    sa.Column('delivery_id', sa.String(length=36), nullable=False),
    sa.Column('endpoint_id', sa.Integer(), nullable=False),
    sa.Column('event_id', BigId, nullable=True),
    sa.Column('topic', sa.String(length=64), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.String(length=500), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['event_id'], ['outbox_events.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('delivery_id'),
    sa.UniqueConstraint('endpoint_id', 'event_id', name='uq_webhook_deliveries_endpoint_event')
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_deliveries_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_deliveries_endpoint_id'), ['endpoint_id'], unique=False)


def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_endpoint_id'))
        batch_op.drop_index('ix_webhook_deliveries_due')

    op.drop_table('webhook_deliveries')
    op.drop_table('webhook_endpoints')
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_hook_deliveries_event_id'))
        batch_op.drop_index('ix_hook_deliveries_due')

    op.drop_table('hook_deliveries')
    with op.batch_alter_table('timer_runs', schema=None) as batch_op:
        batch_op.drop_index('ix_timer_runs_status')

    op.drop_table('timer_runs')
    with op.batch_alter_table('timers', schema=None) as batch_op:
        batch_op.drop_index('ix_timers_next_run_at')

    op.drop_table('timers')
    op.drop_table('plugin_documents')
    op.drop_table('plugin_states')
