"""environment validations: each re-run of a training environment's validation asked
for from the dashboard, with its result

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'environment_validations',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('instance_id', sa.String(length=255), nullable=False),
        sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('requested_by', sa.String(length=255), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('detail', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        'ix_environment_validations_instance_id', 'environment_validations', ['instance_id']
    )


def downgrade() -> None:
    op.drop_index('ix_environment_validations_instance_id', 'environment_validations')
    op.drop_table('environment_validations')
