"""jobs by repository and creation time: the daily per-repo budget that every webhook
counts read all of a repository's jobs ever (14 ms per webhook at 10,000 jobs), not today's

Revision ID: 0013
Revises: 0012
"""
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_jobs_repo_created', 'jobs', ['forge', 'repo', 'created_at'])


def downgrade() -> None:
    op.drop_index('ix_jobs_repo_created', table_name='jobs')
