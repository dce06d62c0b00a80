"""index each endpoint's pending webhook deliveries: the plugin tick reads per endpoint

The plugin tick asks, per endpoint, for its first pending delivery (when it is next
due, and which endpoints have one to send now). This partial index answers that
with one index entry per endpoint, however long a backing-off endpoint's queue is.
Built concurrently (issue 35).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

"""
from alembic import op
import sqlalchemy as sa

from webapp.ops.release import steps


# revision identifiers, used by Alembic.
revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")


def upgrade():
    steps.create_index('ix_webhook_deliveries_endpoint_pending', 'webhook_deliveries',
                       ['endpoint_id', 'next_attempt_at'], where=PENDING)


def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_endpoint_pending',
                            postgresql_where=PENDING, sqlite_where=PENDING)
