"""post revisions (every version of a post's text) and scheduled changes to live posts

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade():
    op.create_table(
        'post_revisions',
        sa.Column('id', BIG_ID, nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('reason', sa.String(length=16), nullable=False),
        sa.Column('restored_from', sa.BigInteger(), nullable=True),
        sa.Column('was_live', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_post_revisions_post_id_id', 'post_revisions', ['post_id', 'id'])
    # every post starts its history with the text it has now, by nobody known
    op.execute("INSERT INTO post_revisions (post_id, title, body, author, reason, was_live, "
               "created_at) SELECT id, title, body, '', 'import', "
               "status = 'published', updated_at FROM posts ORDER BY id")
    op.create_table(
        'scheduled_changes',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('apply_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('base_version', sa.Integer(), nullable=False),
        sa.Column('base_digest', sa.String(length=32), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('post_id'),
    )
    op.create_index('ix_scheduled_changes_apply_at', 'scheduled_changes', ['apply_at'])


def downgrade():
    op.drop_index('ix_scheduled_changes_apply_at', table_name='scheduled_changes')
    op.drop_table('scheduled_changes')
    op.drop_index('ix_post_revisions_post_id_id', table_name='post_revisions')
    op.drop_table('post_revisions')
