"""the fleet's versions, and what each release cost the fleet

Each process's lock session records the version it runs and the newest migration its
code ships (process_versions, keyed by its boot id): the status page shows them, and a
contract step refuses to run while a lock session runs older code. A deploy records how
long its release took, the longest the fleet waited behind it, and its migrations.

A new table (no lock on any other), and three nullable columns without a default: a
change of deploys' catalogue entry, under its lock for a moment.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-14

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None

WHEN = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        'process_versions',
        sa.Column('boot', sa.String(length=16), nullable=False),
        sa.Column('instance', sa.String(length=200), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('version', sa.String(length=200), nullable=False),
        sa.Column('source', sa.String(length=40), nullable=False),
        sa.Column('schema_head', sa.String(length=32), nullable=False),
        sa.Column('started_at', WHEN, nullable=False),
        sa.Column('seen_at', WHEN, nullable=False),
        sa.PrimaryKeyConstraint('boot'),
        if_not_exists=True,  # committed before deploys' columns: a try again finds it
    )
    steps.add_columns('deploys',
                      sa.Column('release_seconds', sa.Float(), nullable=True),
                      sa.Column('release_wait_seconds', sa.Float(), nullable=True),
                      sa.Column('release_report', sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table('deploys', schema=None) as batch_op:
        batch_op.drop_column('release_report')
        batch_op.drop_column('release_wait_seconds')
        batch_op.drop_column('release_seconds')
    op.drop_table('process_versions')
