"""claims carry the holder beside the term; timer runs record the leadership that claimed them

A leader's claims (webhook and hook deliveries, timer runs) name the (term, holder) of
the plugin key they were made under: the holder is the lock session's application_name,
which carries a random nonce, so a term number reissued after a lossy failover fences
nothing in. A run still running under a leadership that is no longer current is settled
as abandoned at once, instead of after its maximum runtime.

Each table in a transaction of its own (issue 35): holding webhook_deliveries' lock while
waiting for hook_deliveries' met the old fleet's delivery tick, which reads them in the
other order, in a deadlock.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade():
    for table in ('webhook_deliveries', 'hook_deliveries'):
        steps.add_columns(table, sa.Column('claimed_holder', sa.String(length=200),
                                           nullable=False, server_default=''))
    steps.add_columns(
        'timer_runs',
        sa.Column('claimed_term', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('claimed_holder', sa.String(length=200), nullable=False, server_default=''))


def downgrade():
    with op.batch_alter_table('timer_runs', schema=None) as batch_op:
        batch_op.drop_column('claimed_holder')
        batch_op.drop_column('claimed_term')
    for table in ('hook_deliveries', 'webhook_deliveries'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('claimed_holder')
