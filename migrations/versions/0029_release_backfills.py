"""backfills the release began and the fleet finishes

A release copies or fixes data in batches for a few seconds at most
(RELEASE_BACKFILL_SECONDS), records where it stopped here, and ends: the new code starts
at once, and the housekeeping plugin's timer on the plugins leader goes on from there.
A backfill that needs the table before this migration (0022's) makes it itself, the same
way (webapp/ops/release/backfills.py, from the model): a new table, no lock on any other.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-15

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'release_backfills',
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('table_name', sa.String(length=63), nullable=False),
        sa.Column('key_column', sa.String(length=63), nullable=False),
        sa.Column('statement', sa.Text(), nullable=False),
        sa.Column('batch', sa.Integer(), nullable=False),
        sa.Column('after_key', sa.BigInteger(), nullable=False),
        sa.Column('batches', sa.Integer(), nullable=False),
        sa.Column('began_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('name'),
        if_not_exists=True,  # 0022's backfill may have made it, from the model
    )


def downgrade():
    op.drop_table('release_backfills')
