"""jobs carry a dispatch sequence, a not-before time and a count of worker losses, so the
sweep alone re-sends deferred jobs and stale messages are recognised

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(
            sa.Column('dispatch_seq', sa.Integer(), nullable=False, server_default='0')
        )
        batch.add_column(sa.Column('not_before', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('requeues', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('deliveries') as batch:
        batch.add_column(sa.Column('body_sha256', sa.String(64), nullable=True))
        batch.create_index('ix_deliveries_body', ['forge', 'body_sha256'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_index('ix_deliveries_body')
        batch.drop_column('body_sha256')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('requeues')
        batch.drop_column('not_before')
        batch.drop_column('dispatch_seq')
