"""API tokens say whether they may do dangerous actions

False for every token made before: a script that adds webhook endpoints is given a new
token, made with the box ticked (webapp.accounts.stepup).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-14

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dangerous_actions', sa.Boolean(), nullable=False,
                                      server_default=sa.text('false')))


def downgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('dangerous_actions')
