"""The trainer's commands on what a user gets wrong or a deployment lacks: a message and
exit 1, never a traceback (each of these was a traceback before)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from tests.fakes import make_git_repo
from trainer.envs.folders import EnvironmentFolders
from trainer.rl.toy import toy_environment

A_PATCH = "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n"
A_PATCH += "@@ -0,0 +1 @@\n+hi\n"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deployment whose store holds the toy environment and whose Docker engine is not
    there."""
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "docker")
    monkeypatch.setenv("RIBBIT_SANDBOX__DOCKER_URL", f"unix://{tmp_path}/no-engine.sock")
    base = make_git_repo(tmp_path / "toy", {"README.md": "toy\n"})
    EnvironmentFolders(data / "trainer").add(toy_environment(base), tmp_path / "toy")
    return data


def _refused(args: list[str], message: str) -> Result:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert f"Error: {message}" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


def test_cli_errors_an_environment_not_stored(data_dir: Path, tmp_path: Path) -> None:
    missing = f"no environment 'nope' in {data_dir / 'trainer'}"
    _refused(["envs", "export", str(tmp_path / "out.jsonl"), "--envs", "toy__toy-0,nope"], missing)
    _refused(["envs", "calibrate", "--envs", "nope"], missing)
    _refused(["model", "evaluate", "v1", "--envs", "nope"], missing)
    _refused(["envs", "export", str(tmp_path / "out.jsonl"), "--envs", "../x"], "'../x' is not")
    train = ["train", "--model", str(tmp_path), "--output-dir", str(tmp_path / "run")]
    _refused([*train, "--envs", "nope"], missing)
    _refused([*train, "--register", "v1", "--heldout", "nope"], missing)


def test_cli_errors_a_selector_that_picks_nothing(data_dir: Path, tmp_path: Path) -> None:
    nothing = "no environments match 'split:nowhere'"
    _refused(["envs", "calibrate", "--envs", "split:nowhere"], nothing)
    _refused(["envs", "image", "--envs", "split:nowhere"], nothing)
    _refused(["model", "evaluate", "v1", "--envs", "split:nowhere"], nothing)
    # An export of nothing is still a file (an empty one), not an error.
    out = tmp_path / "none.jsonl"
    result = CliRunner().invoke(main, ["envs", "export", str(out), "--envs", "split:nowhere"])
    assert result.exit_code == 0, result.output
    assert "exported 0 environment(s)" in result.output


def test_cli_errors_a_file_that_is_not_jsonl(data_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "a__b-1"}\n{not json\n')
    _refused(["envs", "import", str(bad)], f"{bad}: not SWE-bench or Ribbit JSONL")


def test_cli_errors_a_sandbox_engine_that_is_not_there(data_dir: Path, tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(A_PATCH)
    _refused(["envs", "grade", "toy__toy-0", "--patch", str(patch)], "sandbox: no Docker engine")


def test_envs_build_takes_a_revision_and_refuses_what_names_no_commit(
    data_dir: Path, tmp_path: Path
) -> None:
    # `--base f51a53b^` was a traceback (resolve_commit takes only a sha).
    from bot.hostgit import revision_commit
    from tests.fakes import commit_files

    repo = tmp_path / "repo"
    first = make_git_repo(repo, {"a.txt": "a\n"})
    second = commit_files(repo, {"a.txt": "b\n"}, "second")
    assert revision_commit(repo, "HEAD^") == first and revision_commit(repo, "HEAD") == second
    issue = tmp_path / "issue.md"
    issue.write_text("title\n")
    build = ["envs", "build", "--checkout", str(repo), "--issue-file", str(issue)]
    build += ["--name", "acme/calc", "--forge", "github", "--fix", "HEAD"]
    for rev in ("nothere", "--upload-pack=touch pwned", "HEAD:a.txt"):
        result = CliRunner().invoke(main, [*build, "--base", rev])
        assert result.exit_code == 2, result.output
        assert f"Invalid value for --base: {rev!r} names no commit in {repo}" in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_relative_output_dir_becomes_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import click

    from trainer.cli import training
    from trainer.distributed import Ranks

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    with click.Context(click.Command("train")) as ctx:
        settings = training.train_settings(
            ctx, Ranks(), {"model": "org/base", "store_dir": None, "output_dir": "runs/one"}
        )
    assert settings.output_dir == str(tmp_path / "runs" / "one")
