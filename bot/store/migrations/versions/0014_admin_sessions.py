"""admin sessions: a browser's dashboard session is a row that logout deletes, so a copied
cookie dies with the session instead of living out its 12 hours

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'admin_sessions',
        sa.Column('id_hash', sa.String(length=64), nullable=False),
        sa.Column('actor', sa.String(length=64), nullable=False),
        sa.Column('token_fingerprint', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id_hash'),
    )
    op.create_index('ix_admin_sessions_expires_at', 'admin_sessions', ['expires_at'])


def downgrade() -> None:
    op.drop_index('ix_admin_sessions_expires_at', table_name='admin_sessions')
    op.drop_table('admin_sessions')
