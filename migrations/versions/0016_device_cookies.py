"""device cookies: browsers that signed in, and the failures they sent

A successful sign-in gives the browser a device cookie (OWASP's "slow down online
guessing attacks with device cookies"); its row keeps the secret's SHA-256, and a failed
sign-in remembers the device it came from, so failures from a trusted browser count
against it alone. login_failures is indexed concurrently (issue 35).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07

"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

# revision identifiers, used by Alembic.
revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'user_devices',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('secret_hash', sa.String(length=64), nullable=False),
        sa.Column('user_agent', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('secret_hash'),
        if_not_exists=True,  # committed before the column: a migration tried again finds it
    )
    op.create_index('ix_user_devices_user_id', 'user_devices', ['user_id'], unique=False,
                    if_not_exists=True)
    steps.add_columns('login_failures', sa.Column('device_id', sa.Integer(), nullable=True))
    steps.create_index('ix_login_failures_device_id', 'login_failures', ['device_id'])


def downgrade():
    with op.batch_alter_table('login_failures', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_login_failures_device_id'))
        batch_op.drop_column('device_id')
    with op.batch_alter_table('user_devices', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_user_devices_user_id'))
    op.drop_table('user_devices')
