"""A repository's own sandbox image on a real engine (Podman through the docker SDK):
a devcontainer Dockerfile built FROM the local sandbox image with no network, cached
by content, used by the sandbox and part of the environment cache's key; images that
break the sandbox's contract, or builds that reach for the network, are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from tests.plugins.sandbox import TEST_LIMITS
from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox
from worker.sandbox.envcache import base_fingerprint
from worker.sandbox.repoimage import ImageChoice, RepoImageError, choose_image
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

REPO = "github:example/own-image"
# JSON with comments and a trailing comma, as devcontainer.json files are written.
DEVCONTAINER = """{
  // the Dockerfile sits next to this file; the context is the repository
  "name": "own-image",
  "build": {"dockerfile": "Dockerfile", "context": ".."},
}
"""


def _repo(root: Path, dockerfile: str, *, fresh: bool = False) -> Path:
    if fresh:
        # New content, so a tag an earlier run built is not simply reused.
        dockerfile = f"# {root}\n{dockerfile}"
    make_git_repo(
        root,
        {
            ".devcontainer/devcontainer.json": DEVCONTAINER,
            ".devcontainer/Dockerfile": dockerfile,
            "tool.txt": "from the context\n",
        },
    )
    return root


@pytest.fixture(scope="module")
def engine(podman_socket: str, sandbox_image: str) -> Iterator[SandboxSettings]:
    yield SandboxSettings(
        backend="docker",
        docker_url=podman_socket,
        image=sandbox_image,
        repo_image_builds=True,
        **TEST_LIMITS,
    )


@pytest.fixture(scope="module")
def built(
    engine: SandboxSettings, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ImageChoice, Path]:
    """One image built for the module: FROM the sandbox image, with a file from the
    build context copied in (the devcontainer's context is the repository root)."""
    repo = _repo(
        tmp_path_factory.mktemp("own-image"),
        f"FROM {engine.image}\nUSER root\nCOPY tool.txt /opt/tool.txt\nUSER 1000:1000\n"
        # An entrypoint that would end the sandbox's pid 1 at once: it must not run.
        'ENTRYPOINT ["/bin/false"]\n',
    )
    return choose_image(engine, RepoConfig(), repo, repo=REPO, backend="docker"), repo


def test_devcontainer_dockerfile_is_built_once_and_runs_the_sandbox(
    engine: SandboxSettings, built: tuple[ImageChoice, Path]
) -> None:
    first, repo = built
    assert first.applied and first.image.startswith("ribbit-repo-")
    again = choose_image(engine, RepoConfig(), repo, repo=REPO, backend="docker")
    assert (again.image, again.built) == (first.image, False)  # same content: reused
    other = choose_image(engine, RepoConfig(), repo, repo="github:example/other", backend="docker")
    assert other.image != first.image  # never shared across repositories by name
    settings = engine.model_copy(update={"image": first.image})
    with open_sandbox(settings, repo) as sb:
        seen = sb.exec("cat /opt/tool.txt; id -u; python --version", timeout=60)
    assert seen.exit_code == 0, seen.stderr
    assert seen.stdout.splitlines()[:2] == ["from the context", "1000"]
    # The environment cache's key names the image the job runs.
    assert base_fingerprint(settings, "docker") != base_fingerprint(engine, "docker")


def test_a_devcontainer_image_the_deployment_allows_runs_the_sandbox(
    engine: SandboxSettings, built: tuple[ImageChoice, Path], tmp_path: Path
) -> None:
    """A devcontainer.json that names an image (here the one built above, on the worker
    already) gets it, once the deployment allows it; it is not the default image."""
    image = built[0].image
    repo = tmp_path / "r"
    make_git_repo(repo, {".devcontainer/devcontainer.json": f'{{"image": "{image}"}}\n'})
    with pytest.raises(RepoImageError, match="does not allow"):
        choose_image(engine, RepoConfig(), repo, repo=REPO, backend="docker")
    allowed = engine.model_copy(update={"repo_images": ["ribbit-repo-*"]})
    choice = choose_image(allowed, RepoConfig(), repo, repo=REPO, backend="docker")
    assert (choice.image, choice.applied, choice.built) == (image, True, False)
    assert choice.to_dict()["requested"] == (
        f"image `{image}` (from `.devcontainer/devcontainer.json`)"
    )
    with open_sandbox(allowed.model_copy(update={"image": choice.image}), repo) as sb:
        seen = sb.exec("cat /opt/tool.txt", timeout=60)
    assert seen.stdout == "from the context\n", seen.stderr


def test_an_image_without_python_is_refused_saying_what_it_lacks(
    engine: SandboxSettings, tmp_path: Path
) -> None:
    repo = _repo(
        tmp_path / "r",
        f"FROM {engine.image}\nUSER root\nRUN rm -f /usr/bin/python3 /usr/bin/python3.*\n",
        fresh=True,
    )
    with pytest.raises(RepoImageError, match=r"lacks /usr/bin/python3.*uid 1000 user"):
        choose_image(engine, RepoConfig(), repo, repo=REPO, backend="docker")


def test_a_build_has_no_network(engine: SandboxSettings, tmp_path: Path) -> None:
    probe = (
        "import socket; socket.create_connection(('151.101.0.223', 443), timeout=5); "
        "print('NETWORK')"
    )
    repo = _repo(tmp_path / "r", f'FROM {engine.image}\nRUN python3 -c "{probe}"\n', fresh=True)
    with pytest.raises(RepoImageError, match="did not build") as caught:
        choose_image(engine, RepoConfig(), repo, repo=REPO, backend="docker")
    message = str(caught.value)
    assert "Network is unreachable" in message
    assert "\nNETWORK" not in message  # the step's output, not its echoed command


def test_named_images_within_the_allow_list_only(engine: SandboxSettings, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_git_repo(repo, {"README.md": "x\n"})
    named = choose_image(engine, RepoConfig(image=engine.image), repo, repo=REPO, backend="docker")
    assert named.image == engine.image and named.applied
    with pytest.raises(RepoImageError, match="does not allow"):
        choose_image(engine, RepoConfig(image="python:3.12"), repo, repo=REPO, backend="docker")
    allowed = engine.model_copy(update={"repo_images": ["python:*"]})
    with pytest.raises(RepoImageError, match="not on this worker"):
        choose_image(allowed, RepoConfig(image="python:3.12"), repo, repo=REPO, backend="docker")
