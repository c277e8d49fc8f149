"""trainer tables: training environments, training runs, model versions

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'training_environments',
        sa.Column('instance_id', sa.String(length=255), nullable=False),
        sa.Column('repo', sa.String(length=255), nullable=False),
        sa.Column('split', sa.String(length=16), nullable=False),
        sa.Column('store_path', sa.Text(), nullable=False),
        sa.Column('calibration_k', sa.Integer(), nullable=False),
        sa.Column('calibration_solved', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('instance_id'),
    )
    op.create_table(
        'training_runs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('base_model', sa.String(length=512), nullable=False),
        sa.Column('output_dir', sa.Text(), nullable=False),
        sa.Column('settings', sa.JSON(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('steps_done', sa.Integer(), nullable=False),
        sa.Column('first_mean_reward', sa.Float(), nullable=True),
        sa.Column('last_mean_reward', sa.Float(), nullable=True),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_table(
        'model_versions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=128), nullable=False),
        sa.Column('base_model', sa.String(length=512), nullable=False),
        sa.Column('adapter_path', sa.Text(), nullable=True),
        sa.Column('run_id', sa.Integer(), nullable=True),
        sa.Column('heldout_pass_rate', sa.Float(), nullable=True),
        sa.Column('heldout_envs', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('promoted_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['run_id'], ['training_runs.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('model_versions')
    op.drop_table('training_runs')
    op.drop_table('training_environments')
