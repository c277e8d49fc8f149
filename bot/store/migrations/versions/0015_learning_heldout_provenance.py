"""learning loop: per-environment held-out results (the paired promotion test compares
them), the judge a score came from, and each version's provenance (its parent and the
exact environments it trained on). Old versions have no rows here: they read as "no
per-environment results, re-score to compare" and "training environments not recorded".

Revision ID: 0015
Revises: 0014
"""
import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('model_versions') as batch:
        batch.add_column(sa.Column('heldout_judge', sa.String(length=64), nullable=True))
        batch.add_column(sa.Column('parent_version', sa.String(length=128), nullable=True))
        batch.add_column(sa.Column('revoked_reason', sa.Text(), nullable=True))
    op.create_table(
        'heldout_results',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('subject', sa.String(length=640), nullable=False),
        sa.Column('line', sa.String(length=64), nullable=False),
        sa.Column('instance_id', sa.String(length=255), nullable=False),
        sa.Column('content_hash', sa.String(length=64), nullable=True),
        sa.Column('k', sa.Integer(), nullable=False),
        sa.Column('solved', sa.Integer(), nullable=False),
        sa.Column('judge', sa.String(length=64), nullable=False),
        sa.Column('scored_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('subject', 'line', 'instance_id', name='uq_heldout_results_subject'),
    )
    op.create_table(
        'version_training_envs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('version_id', sa.Integer(), nullable=False),
        sa.Column('instance_id', sa.String(length=255), nullable=False),
        sa.Column('content_hash', sa.String(length=64), nullable=False),
        sa.Column('forge', sa.String(length=32), nullable=True),
        sa.Column('repo', sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(['version_id'], ['model_versions.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_version_training_envs_repo', 'version_training_envs', ['repo'])


def downgrade() -> None:
    op.drop_index('ix_version_training_envs_repo', 'version_training_envs')
    op.drop_table('version_training_envs')
    op.drop_table('heldout_results')
    with op.batch_alter_table('model_versions') as batch:
        batch.drop_column('revoked_reason')
        batch.drop_column('parent_version')
        batch.drop_column('heldout_judge')
