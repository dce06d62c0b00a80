"""editors

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

Indexes for the editors' post list at 100,000 posts: newest first per status
(keyset on id), and title search. On PostgreSQL the title index is a trigram GIN
index (pg_trgm; ILIKE '%word%' uses it); where the extension cannot be created,
and on SQLite, it is a plain index. Both are built concurrently (issue 35): the
editors' writes go on while the posts are indexed.
"""
import logging

from alembic import op
import sqlalchemy as sa

from webapp.ops.release import steps


# revision identifiers, used by Alembic.
revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def _trigram_available() -> bool:
    """Create pg_trgm if it is missing; False when this role may not."""
    if steps.offline():
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        return True
    bind = op.get_bind()
    savepoint = bind.begin_nested()
    try:
        bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except sa.exc.DBAPIError as exc:
        savepoint.rollback()
        log.warning("pg_trgm unavailable (%s); title search uses a plain index", exc.orig)
        return False
    savepoint.commit()
    return True


def upgrade():
    steps.create_index('ix_posts_status_id', 'posts', ['status', 'id'])
    if steps.on_postgresql() and _trigram_available():
        steps.create_index('ix_posts_title_trgm', 'posts', ['title'], using='gin',
                           ops={'title': 'gin_trgm_ops'})
    else:
        steps.create_index('ix_posts_title_trgm', 'posts', ['title'])


def downgrade():
    with op.batch_alter_table('posts', schema=None) as batch_op:
        batch_op.drop_index('ix_posts_title_trgm')
        batch_op.drop_index('ix_posts_status_id')
