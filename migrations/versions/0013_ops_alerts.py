"""ops alerts through webhooks: one outbox row per occurrence, Slack bodies per endpoint

ops.* events are outbox rows like post events; dedupe_key (UNIQUE, NULL for post events)
names an occurrence, so the processes that may each notice it write it once. An
endpoint's payload_format says whether it gets the event as JSON or Slack's {"text": …}.
The unique constraint adopts an index built concurrently (issue 35): the outbox is
written on all along.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    steps.add_columns('outbox_events',
                      sa.Column('dedupe_key', sa.String(length=200), nullable=True))
    steps.add_unique('uq_outbox_events_dedupe_key', 'outbox_events', ['dedupe_key'])
    steps.add_columns('webhook_endpoints', sa.Column('payload_format', sa.String(length=16),
                                                     nullable=False, server_default='standard'))


def downgrade():
    with op.batch_alter_table('webhook_endpoints', schema=None) as batch_op:
        batch_op.drop_column('payload_format')
    with op.batch_alter_table('outbox_events', schema=None) as batch_op:
        batch_op.drop_constraint('uq_outbox_events_dedupe_key', type_='unique')
        batch_op.drop_column('dedupe_key')
