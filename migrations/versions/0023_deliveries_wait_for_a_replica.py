"""webhook deliveries carry the WAL position a standby must replay before they are sent

Where the primary streams to a standby, an event's deliveries wait until a standby has
replayed the event's commit (webapp.ops.replica), so a lossy failover can undo a
publication but never one a receiver already heard of. A nullable column with no
default: PostgreSQL adds it without rewriting the table or holding its lock for long.
Rows written before it are never held.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-10

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade():
    steps.add_columns('webhook_deliveries', sa.Column('replica_lsn', sa.BigInteger(),
                                                      nullable=True))


def downgrade():
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_column('replica_lsn')
