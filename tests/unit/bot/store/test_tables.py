"""What the job row derives from its columns."""

from __future__ import annotations

import pytest

from bot.forges.base import RepoRef, forge_name
from bot.store.tables import Job


def test_a_jobs_repository_is_one_typed_ref() -> None:
    job = Job(id="j", kind="solve", forge="gitlab", repo="group/sub/project")
    assert job.repo_ref == RepoRef("gitlab", "group/sub/project")


def test_a_forge_column_ribbit_does_not_know_is_an_error_not_a_lie() -> None:
    with pytest.raises(ValueError, match="'gitea' is not a forge Ribbit knows"):
        _ = Job(id="j", kind="solve", forge="gitea", repo="a/b").repo_ref
    assert forge_name("github") == "github"
