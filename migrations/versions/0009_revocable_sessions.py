"""sessions live on the server, so they can end; tokens can expire and be revoked

A browser's session is a row whose secret the cookie carries: signing out, a password
change or reset, deactivation or an admin ends it at once. Tokens are revoked, not
deleted, so admins still see which ended and why. users.session_version, which the
cookie used to carry and which started at 1 for everyone, goes.

The drop came before expand/contract (docs/deploying.md): an install still below 0009
releases it with its old fleet stopped, as the drop's reviewed exception says.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

"""
from alembic import op
import sqlalchemy as sa

from webapp.ops.release import steps


# revision identifiers, used by Alembic.
revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'user_sessions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('secret_hash', sa.String(length=64), nullable=False),
        sa.Column('address', sa.String(length=64), nullable=False),
        sa.Column('user_agent', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('ended_why', sa.String(length=40), nullable=False, server_default=''),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('secret_hash'),
        if_not_exists=True,  # committed before the columns: a migration tried again finds it
    )
    op.create_index('ix_user_sessions_user_id_address', 'user_sessions',
                    ['user_id', 'address'], unique=False, if_not_exists=True)
    steps.add_columns(
        'api_tokens',
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_why', sa.String(length=40), nullable=False, server_default=''))
    # squawk-ignore ban-drop-column: released in December 2026, before contract steps were
    # separate releases; the code of 0008 reads users.session_version, so an install still
    # below 0009 stops its old fleet for this release (docs/deploying.md, expand/contract)
    steps.drop_columns('users', 'session_version')


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_version', sa.Integer(), nullable=False,
                                      server_default='1'))
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('revoked_why')
        batch_op.drop_column('revoked_at')
        batch_op.drop_column('expires_at')
    op.drop_index('ix_user_sessions_user_id_address', table_name='user_sessions')
    op.drop_table('user_sessions')
