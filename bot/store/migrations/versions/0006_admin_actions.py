"""admin audit log: every dashboard action (who, when, what, outcome)

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'admin_actions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor', sa.String(length=255), nullable=False),
        sa.Column('action', sa.String(length=32), nullable=False),
        sa.Column('target', sa.String(length=300), nullable=False),
        sa.Column('outcome', sa.String(length=16), nullable=False),
        sa.Column('detail', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_admin_actions_at', 'admin_actions', ['at'])


def downgrade() -> None:
    op.drop_index('ix_admin_actions_at', table_name='admin_actions')
    op.drop_table('admin_actions')
