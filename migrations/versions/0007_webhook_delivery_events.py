"""index webhook deliveries by event: trimming the outbox stays a lookup per event

Deleting an outbox event makes PostgreSQL set event_id to NULL in the webhook
deliveries that refer to it (ON DELETE SET NULL); without this index that is a
scan of every webhook delivery for each event deleted. Built concurrently (issue 35).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

"""
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    steps.create_index('ix_webhook_deliveries_event_id', 'webhook_deliveries', ['event_id'])


def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_event_id')
