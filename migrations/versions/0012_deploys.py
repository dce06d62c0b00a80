"""deploys recorded by the release phase

`flask --app webapp release` migrates and then records the version being released;
the status page's deploy report measures each deploy's window against it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'deploys',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('version', sa.String(length=200), nullable=False),
        sa.Column('source', sa.String(length=40), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_deploys_at', 'deploys', ['at'], unique=False)


def downgrade():
    op.drop_index('ix_deploys_at', table_name='deploys')
    op.drop_table('deploys')
