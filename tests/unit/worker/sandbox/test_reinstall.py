"""The copy a set-up installed, installed again offline (worker/sandbox/reinstall.py): the
build backend the base's pyproject.toml names is fetched while the set-up's network is
there and kept in the snapshot, and each later sandbox's reinstall finds it; nothing is
fetched for an editable install or a project on pip's default backend. On a fake
sandbox and host folders; the real projects (hatchling, flit_core, hatch-vcs) are in
tests/integration/test_copy_install_backends.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

import worker.sandbox.reinstall as reinstall
from worker.repo_config import RepoConfig
from worker.sandbox.base import ExecResult
from worker.sandbox.envcache import JobEnvironment
from worker.sandbox.reinstall import BUILD_BACKEND, build_requirements, reinstall_copies
from worker.sandbox.setup import EgressRun, SetupResult
from worker.sandbox.snapshot import EnvSnapshot
from worker.settings import SandboxSettings

SITE = "venv/lib/python3.11/site-packages"
FLIT = '[build-system]\nrequires = ["flit_core>=3.2,<4", "hatchling", 3]\n'
HATCH = '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\nbuild-backend = "hatchling.build"\n'


def _direct_url(url: str, *, editable: bool = False) -> str:
    return json.dumps({"url": url, "dir_info": {"editable": True} if editable else {}})


class CopySandbox:
    """A set-up sandbox whose environment holds ``env`` files; pip's ``--target`` install
    adds the backend to it, as the real one would."""

    backend = "fake"

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.runs: list[tuple[list[str], dict[str, str]]] = []

    def exec(
        self, command: str | Sequence[str], *, env: Mapping[str, str] | None = None, **_: object
    ) -> ExecResult:
        argv = [command] if isinstance(command, str) else list(command)
        self.runs.append((argv, dict(env or {})))
        if BUILD_BACKEND in argv:
            self.env["build-backend/hatchling/__init__.py"] = ""
        return ExecResult(0, "", "", 0.0)

    def export_setup_state(self, env_dest: Path, workspace_dest: Path) -> None:
        workspace_dest.mkdir(parents=True)
        for rel, text in self.env.items():
            (env_dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (env_dest / rel).write_text(text)

    def restore_setup_state(self, snapshot: EnvSnapshot) -> None:
        pass

    def leave_out_of_diff(self, paths: Sequence[str]) -> None:
        pass


def _checkout(tmp_path: Path, files: Mapping[str, str]) -> Path:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    repo.mkdir(exist_ok=True)
    return repo


def test_the_backends_requirements_come_from_each_copys_pyproject(tmp_path: Path) -> None:
    repo = _checkout(
        tmp_path,
        {
            "pyproject.toml": HATCH,
            "sub/pyproject.toml": FLIT,
            "legacy/setup.py": "",  # pip's default backend: the virtualenv's setuptools
            "bare/pyproject.toml": "[project]\nname = 'x'\n",
            "broken/pyproject.toml": "[build-system\n",
        },
    )
    copies = [
        "/workspace",
        "/workspace/sub",
        "/workspace/legacy",
        "/workspace/bare",
        "/workspace/broken",
    ]
    assert build_requirements(repo, copies) == ["hatchling", "hatch-vcs", "flit_core>=3.2,<4"]
    assert build_requirements(repo, []) == []


def test_a_copy_install_fetches_its_backend_into_the_snapshot_and_the_reinstall_uses_it(
    tmp_path: Path,
) -> None:
    repo = _checkout(tmp_path, {"pyproject.toml": HATCH})
    sandbox = CopySandbox(
        {f"{SITE}/calc-1.0.dist-info/direct_url.json": _direct_url("file:///workspace")}
    )
    job = JobEnvironment(
        RepoConfig(setup="pip install ."), SandboxSettings(), checkout=repo, workdir=tmp_path / "w"
    )
    set_up = SetupResult(command="pip install .", ok=True, exit_code=0, output="", duration_s=0)
    adopted = job.adopt(sandbox, set_up, cache=True)

    assert adopted.ok
    fetch = [argv for argv, _ in sandbox.runs if BUILD_BACKEND in argv]
    pip = ["python", "-m", "pip", "install", "-q", "--upgrade", "--target", BUILD_BACKEND]
    assert fetch == [[*pip, "--", "hatchling", "hatch-vcs"]]
    assert f"--target {BUILD_BACKEND} -- hatchling hatch-vcs" in adopted.output
    # The snapshot was taken again after the fetch: the backend is in it.
    assert job.snapshot is not None
    assert (job.snapshot.env / "build-backend" / "hatchling" / "__init__.py").is_file()

    later = CopySandbox({})
    restored = job.restore(later)
    [(argv, env)] = later.runs
    assert argv[-2:] == ["--force-reinstall", "/workspace"] and "--no-index" in argv
    assert env == {"PYTHONPATH": BUILD_BACKEND}
    assert f"PYTHONPATH={BUILD_BACKEND} python -m pip install" in restored.output


@pytest.mark.parametrize(
    "installed",
    [
        _direct_url("file:///workspace", editable=True),  # -e: the tree itself is imported
        _direct_url("https://files.example/calc-1.0.tar.gz"),  # not the workspace's code
    ],
)
def test_nothing_is_fetched_without_a_copy_of_the_workspace(tmp_path: Path, installed: str) -> None:
    repo = _checkout(tmp_path, {"pyproject.toml": HATCH})
    sandbox = CopySandbox({f"{SITE}/calc-1.0.dist-info/direct_url.json": installed})
    job = JobEnvironment(
        RepoConfig(setup="pip install ."), SandboxSettings(), checkout=repo, workdir=tmp_path / "w"
    )
    set_up = SetupResult(command="pip install .", ok=True, exit_code=0, output="", duration_s=0)
    assert job.adopt(sandbox, set_up).ok
    assert sandbox.runs == []


def test_a_stale_build_folder_goes_and_no_backend_means_no_pythonpath(tmp_path: Path) -> None:
    snapshot = EnvSnapshot(tmp_path / "snap")
    (snapshot.workspace / "build").mkdir(parents=True)
    (snapshot.env / SITE / "calc-1.0.dist-info").mkdir(parents=True)
    (snapshot.env / SITE / "calc-1.0.dist-info" / "direct_url.json").write_text(
        _direct_url("file:///workspace")
    )
    sandbox = CopySandbox({})
    restored = SetupResult(command="pip install .", ok=True, exit_code=0, output="", duration_s=0)
    result = reinstall_copies(sandbox, snapshot, restored, 60, started=0.0)
    assert result.ok
    assert sandbox.runs[0][0] == ["rm", "-rf", "--", "/workspace/build"]
    assert sandbox.runs[1][1] == {} and "\n$ python -m pip install" in result.output
    # Nothing installed as a copy: nothing to do.
    plain = EnvSnapshot(tmp_path / "plain")
    (plain.env / "venv").mkdir(parents=True)
    assert reinstall_copies(CopySandbox({}), plain, restored, 60, started=0.0) is restored


def test_the_fetch_is_shown_the_credentials_only_where_the_set_up_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[bool] = []
    envs: list[object] = []

    def fake_egress(sandbox: object, argv: list[str], settings: object, **kw: object) -> EgressRun:
        shown.append(bool(kw["credentials"]))
        envs.append(kw["env"])
        return EgressRun(ExecResult(1, "", "no index", 0.0), network=True, blocked=())

    monkeypatch.setattr(reinstall, "exec_with_egress", fake_egress)
    manner = reinstall.SetupManner(credentials=False, env={"A": "1"})
    said = reinstall.fetch_build_backend(CopySandbox({}), ["hatchling"], SandboxSettings(), manner)
    assert shown == [False] and envs == [{"A": "1"}]
    assert "no index" in said and "[could not fetch the build backend (exit 1)]" in said
    # A patch's manifests are installed without the deployment's credentials
    # (worker/gates/basesetup.py); the base's set-up is shown them.
    repo = _checkout(tmp_path, {"pyproject.toml": HATCH})
    copy = {f"{SITE}/calc-1.0.dist-info/direct_url.json": _direct_url("file:///workspace")}
    set_up = SetupResult(command="pip install .", ok=True, exit_code=0, output="", duration_s=0)
    for credentials in (True, False):
        job = JobEnvironment(
            RepoConfig(setup="pip install ."),
            SandboxSettings(),
            checkout=repo,
            workdir=tmp_path / f"w{credentials}",
        )
        job.manner = reinstall.SetupManner(
            credentials, None if credentials else {"PIP_ONLY_BINARY": ":all:"}
        )
        job.adopt(CopySandbox(copy), set_up)
    assert shown == [False, True, False]
    assert envs[1:] == [None, {"PIP_ONLY_BINARY": ":all:"}]


def test_a_package_file_the_set_up_built_in_the_workspace_is_a_set_up_failure(
    tmp_path: Path,
) -> None:
    # `pip wheel -w dist . && pip install dist/*.whl`: the wheel holds the base's code,
    # and installing it again would test that code in the patched tree's run.
    snapshot = EnvSnapshot(tmp_path / "snap")
    (snapshot.env / SITE / "calc-1.0.dist-info").mkdir(parents=True)
    wheel = "file:///workspace/dist/calc-1.0-py3-none-any.whl"
    (snapshot.env / SITE / "calc-1.0.dist-info" / "direct_url.json").write_text(
        json.dumps({"url": wheel, "archive_info": {}})
    )
    sandbox = CopySandbox({})
    restored = SetupResult(command="pip install .", ok=True, exit_code=0, output="", duration_s=0)
    result = reinstall_copies(sandbox, snapshot, restored, 60, started=0.0)
    assert not result.ok and result.exit_code == 1
    assert "installed /workspace/dist/calc-1.0-py3-none-any.whl, a package file" in result.output
    assert sandbox.runs == []  # nothing installed from it
