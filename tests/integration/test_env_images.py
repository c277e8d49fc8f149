"""A SkyRL-exported environment, graded the way SkyRL's Mini-SWE-Agent example grades it:
in a container of the environment's testbed image (built here on a real Podman engine
from the store's bundle), ``git apply`` the model's patch in /testbed, then ``bash`` the
record's ``eval_script``; resolved iff it exits 0."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.plugins.trainer import FixRepo, calc_environment
from trainer.envs.export import build_testbed_image, skyrl_record
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def testbed(
    fix_with_new_test: FixRepo, tmp_path: Path, docker_settings: SandboxSettings
) -> Iterator[tuple[Environment, str, docker.DockerClient]]:
    # Built on the host's pytest; graded in the image, whose interpreter is python3.
    env = calc_environment(fix_with_new_test, issue="add(2, 3) returns -1 instead of 5.")
    env = env.model_copy(update={"test_command": "python3 -m pytest"})
    store = EnvironmentFolders(tmp_path / "store")
    store.add(env, fix_with_new_test.path)
    client = docker.DockerClient(base_url=docker_settings.docker_url, timeout=300)
    tag = f"ribbit-env-test/{uuid.uuid4().hex[:8]}:latest"
    build_testbed_image(env, store, client, base_image=docker_settings.image, tag=tag)
    try:
        yield env, tag, client
    finally:
        client.images.remove(tag, force=True)
        client.close()


@contextlib.contextmanager
def _container(client: docker.DockerClient, image: str) -> Iterator[Any]:
    """A running container of ``image`` to exec in. (Not a one-shot ``run``: Podman's
    compat API can miss the exit of a container that ends at once, and wait forever.)"""
    container = client.containers.run(
        image, ["sleep", "600"], detach=True, network_mode="none", labels={"ribbit-test": "1"}
    )
    try:
        yield container
    finally:
        container.remove(force=True)


def _evaluate(client: docker.DockerClient, image: str, record: dict, patch: str) -> int:
    """SkyRL's evaluate_trajectory, with the container run the way Ribbit runs sandboxes."""
    with _container(client, image) as container:
        if patch:
            applied = container.exec_run(
                ["bash", "-c", f"git apply <<'PATCH_EOF'\n{patch}\nPATCH_EOF"], workdir="/testbed"
            )
            assert applied.exit_code == 0, applied.output
        script = record["instance"]["eval_script"]
        result = container.exec_run(["bash", "-c", f"bash <<'EOF'\n{script}\nEOF"])
        return int(result.exit_code)


def test_skyrl_eval_script_grades_patches_in_the_testbed_image(
    testbed: tuple[Environment, str, docker.DockerClient],
) -> None:
    env, image, client = testbed
    record = skyrl_record(env, image_name=image)
    assert record["instance"]["image_name"] == image
    with _container(client, image) as container:
        head = container.exec_run(["git", "-C", "/testbed", "rev-parse", "HEAD"])
    assert head.output.decode().strip() == env.base_commit
    assert _evaluate(client, image, record, env.patch) == 0
    assert _evaluate(client, image, record, "") == 1


def test_envs_image_command_builds_the_image_the_records_name(
    fix_with_new_test: FixRepo,
    tmp_path: Path,
    docker_settings: SandboxSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from bot.cli import main
    from trainer.envs.export import image_name_for

    env = calc_environment(fix_with_new_test, issue="add(2, 3) returns -1 instead of 5.")
    store = tmp_path / "store"
    EnvironmentFolders(store).add(env, fix_with_new_test.path)
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__DOCKER_URL", str(docker_settings.docker_url))
    monkeypatch.setenv("RIBBIT_SANDBOX__IMAGE", docker_settings.image)
    result = CliRunner().invoke(main, ["envs", "image", "--store", str(store)])
    assert result.exit_code == 0, result.output
    tag = image_name_for(env)
    assert result.output.split() == [env.instance_id, tag]
    client = docker.DockerClient(base_url=docker_settings.docker_url)
    try:
        labels = client.images.get(tag).labels
        assert labels["org.ribbit.environment"] == env.instance_id
    finally:
        client.images.remove(tag, force=True)
        client.close()
