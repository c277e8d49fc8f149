"""noise pauses: repositories paused for a low merge rate, with the numbers and whether
their maintainers were told

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'noise_pauses',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('forge', sa.String(length=16), nullable=False),
        sa.Column('repo', sa.String(length=255), nullable=False),
        sa.Column('paused_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('window_start', sa.DateTime(timezone=True), nullable=False),
        sa.Column('merged', sa.Integer(), nullable=False),
        sa.Column('closed', sa.Integer(), nullable=False),
        sa.Column('issue_number', sa.Integer(), nullable=True),
        sa.Column('installation_id', sa.BigInteger(), nullable=True),
        sa.Column('commented_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('notified_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_noise_pauses_repo', 'noise_pauses', ['forge', 'repo'])


def downgrade() -> None:
    op.drop_index('ix_noise_pauses_repo', table_name='noise_pauses')
    op.drop_table('noise_pauses')
