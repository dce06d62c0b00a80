"""TOTP two-factor sign-in: an encrypted secret per user, and single-use recovery codes

users' columns come in a transaction of their own (issue 35): every signed-in request
reads users, and waits for that lock a moment only.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade():
    steps.add_columns(
        'users',
        sa.Column('totp_secret', sa.String(length=255), nullable=True),
        sa.Column('totp_on_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('totp_last_step', sa.BigInteger(), nullable=False, server_default='0'))
    op.create_table(
        'recovery_codes',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('code_hash', sa.String(length=64), nullable=False),
        sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('recovery_codes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_recovery_codes_user_id'), ['user_id'], unique=False)


def downgrade():
    with op.batch_alter_table('recovery_codes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_recovery_codes_user_id'))
    op.drop_table('recovery_codes')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('totp_last_step')
        batch_op.drop_column('totp_on_at')
        batch_op.drop_column('totp_secret')
