"""review before publish: a post's place in review, and the site's "Require review"

A new table (one row a post that was ever in review: its writer, state, reviewer and note)
and one boolean on site_state, added alone with a server default: no row is rewritten.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-16

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'post_reviews',
        sa.Column('post_id', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('author', sa.String(length=254), nullable=False),
        sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('reviewer_id', sa.Integer(), nullable=True),
        sa.Column('reviewer', sa.String(length=254), nullable=False),
        sa.Column('reviewed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('note', sa.Text(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['post_id'], ['posts.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['author_id'], ['users.id'], ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['reviewer_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('post_id'),
        if_not_exists=True,
    )
    op.create_index('ix_post_reviews_state', 'post_reviews', ['state'], unique=False,
                    if_not_exists=True)
    op.create_index('ix_post_reviews_author_id', 'post_reviews', ['author_id'], unique=False,
                    if_not_exists=True)
    steps.add_columns('site_state', sa.Column('require_review', sa.Boolean(), nullable=False,
                                              server_default=sa.false()))


def downgrade():
    steps.drop_columns('site_state', 'require_review')
    op.drop_index('ix_post_reviews_author_id', table_name='post_reviews')
    op.drop_index('ix_post_reviews_state', table_name='post_reviews')
    op.drop_table('post_reviews')
