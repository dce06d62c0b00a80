"""account policy: who must sign in with a second factor (nobody, admins, everyone)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'account_policy',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('two_factor_required', sa.String(length=16), nullable=False,
                  server_default='nobody'),
        sa.PrimaryKeyConstraint('id'),
    )


def downgrade():
    op.drop_table('account_policy')
