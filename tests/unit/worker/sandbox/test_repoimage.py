"""A repository's own image and setup hosts: what is read, and what is refused before
any engine is asked (no engine here: the refusals must come first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.repo_config import RepoConfig, parse_repo_config
from worker.sandbox.egress_policy import REPO_HOST_REFUSED, repo_setup_hosts
from worker.sandbox.repoimage import (
    ImageRequest,
    RepoImageError,
    choose_image,
    devcontainer_request,
    dockerfile_images,
    image_allowed,
    image_request,
    parse_dockerfile,
    strip_jsonc,
)
from worker.settings import SandboxSettings

SANDBOX = SandboxSettings(backend="docker", image="ribbit-sandbox:latest")


class NoEngine:
    """Any use of the engine fails the test: these refusals need none."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the engine was asked ({name}) before the refusal")


def _devcontainer(root: Path, data: object, *, name: str = ".devcontainer") -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "devcontainer.json").write_text(
        data if isinstance(data, str) else json.dumps(data)
    )
    return root


def test_jsonc_comments_and_trailing_commas_go_strings_stay() -> None:
    text = '{\n // a comment\n "image": "reg.example/a//b", /* block */ "x": [1, 2,],\n}'
    assert json.loads(strip_jsonc(text)) == {"image": "reg.example/a//b", "x": [1, 2]}
    assert json.loads(strip_jsonc(r'{"a": "quote \" // not a comment"}')) == {
        "a": 'quote " // not a comment'
    }


def test_devcontainer_build_paths_are_relative_to_its_folder(tmp_path: Path) -> None:
    _devcontainer(
        tmp_path,
        {"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "${localEnv:HOME}"}}},
    )
    request = image_request(RepoConfig(), tmp_path)
    assert request is not None
    assert (request.dockerfile, request.context) == (".devcontainer/Dockerfile", ".")
    # Taken literally: the worker's environment is never expanded into a build.
    assert request.build_args == (("V", "${localEnv:HOME}"),)


def test_ribbit_yml_image_wins_over_the_devcontainer(tmp_path: Path) -> None:
    _devcontainer(tmp_path, {"image": "other:1"})
    request = image_request(RepoConfig(image="mine:2"), tmp_path)
    assert request is not None and (request.image, request.source) == ("mine:2", ".ribbit.yml")
    assert parse_repo_config("image: mine:2\nsetup_hosts: [a.example.org]\n").setup_hosts == [
        "a.example.org"
    ]


@pytest.mark.parametrize(
    "build",
    [
        {"dockerfile": "Dockerfile", "context": "../.."},
        {"dockerfile": "../../etc/Dockerfile"},
        {"dockerfile": "link/Dockerfile"},
    ],
)
def test_build_paths_outside_the_repository_are_refused(tmp_path: Path, build: object) -> None:
    repo = tmp_path / "repo"
    _devcontainer(repo, {"build": build})
    (repo / ".devcontainer" / "link").symlink_to(tmp_path)
    with pytest.raises(RepoImageError, match="outside the repository"):
        devcontainer_request(
            repo / ".devcontainer" / "devcontainer.json", repo, ".devcontainer/devcontainer.json"
        )


def test_only_allowed_images_compared_as_written() -> None:
    allowed = SANDBOX.model_copy(update={"repo_images": ["python:*", "node:20"]})
    assert image_allowed("ribbit-sandbox:latest", SANDBOX)
    assert not image_allowed("python:3.12", SANDBOX)  # default: the sandbox image only
    assert image_allowed("python:3.12", allowed) and image_allowed("node:20", allowed)
    for name in ("python", "evil/python:3.12", "docker.io/library/python:3.12", "node:20-x"):
        assert not image_allowed(name, allowed), name


def test_a_disallowed_image_is_refused_before_the_engine(tmp_path: Path) -> None:
    with pytest.raises(RepoImageError, match=r"does not allow.*REPO_IMAGES"):
        choose_image(
            SANDBOX,
            RepoConfig(image="python:3.12"),
            tmp_path,
            repo="r",
            backend="docker",
            client=NoEngine(),
        )


@pytest.mark.parametrize(
    ("dockerfile", "refused"),
    [
        ("FROM python:3.12\n", "python:3.12"),
        ("FROM --platform=linux/amd64 python:3.12 AS b\nRUN true\n", "python:3.12"),
        ("ARG BASE=ribbit-sandbox:latest\nFROM $BASE\n", "$BASE"),
        ("FROM ribbit-sandbox:latest\nCOPY --from=alpine:3 /x /y\n", "alpine:3"),
    ],
)
def test_dockerfile_bases_outside_the_allow_list_are_refused_before_building(
    tmp_path: Path, dockerfile: str, refused: str
) -> None:
    _devcontainer(tmp_path, {"build": {"dockerfile": "Dockerfile"}})
    (tmp_path / ".devcontainer" / "Dockerfile").write_text(dockerfile)
    with pytest.raises(RepoImageError, match="does not allow") as caught:
        choose_image(SANDBOX, RepoConfig(), tmp_path, repo="r", backend="docker", client=NoEngine())
    assert f"`{refused}`" in str(caught.value)


def test_dockerfile_stages_and_flags() -> None:
    text = "FROM a AS build\nRUN x \\\n  && y\nFROM b\nCOPY --from=build /o /o\n"
    assert dockerfile_images(text) == ["a", "b"]
    for bad, why in [
        (text, "multi-stage"),
        ("FROM a\nRUN --mount=type=cache,target=/c true\n", "not supported"),
        ("FROM a\nRUN <<EOF\necho\nEOF\n", "heredoc"),
        ("FROM a\nONBUILD RUN true\n", "unsupported Dockerfile instruction"),
        ("RUN true\n", "start with FROM"),
    ]:
        with pytest.raises(RepoImageError, match=why):
            parse_dockerfile(bad)
    steps = parse_dockerfile("# c\nFROM a\nENV A=1\nWORKDIR /w\nUSER 1000\nCMD x\n")
    assert [s.instruction for s in steps] == ["FROM", "ENV", "WORKDIR", "USER", "CMD"]


def test_bubblewrap_says_the_image_does_not_apply(tmp_path: Path) -> None:
    choice = choose_image(
        SANDBOX, RepoConfig(image="python:3.12"), tmp_path, repo="r", backend="bubblewrap"
    )
    assert choice.image == SANDBOX.image and not choice.applied
    assert choice.note is not None and "bubblewrap" in choice.note
    assert "python:3.12" in choice.note
    plain = choose_image(SANDBOX, RepoConfig(), tmp_path, repo="r", client=NoEngine())
    assert plain.note is None and plain.requested is None


def test_builds_can_be_turned_off(tmp_path: Path) -> None:
    _devcontainer(tmp_path, {"build": {"dockerfile": "Dockerfile"}})
    off = SANDBOX.model_copy(update={"repo_image_builds": False})
    with pytest.raises(RepoImageError, match="REPO_IMAGE_BUILDS"):
        choose_image(off, RepoConfig(), tmp_path, repo="r", backend="docker", client=NoEngine())


def test_repo_setup_hosts_only_within_the_deployments_permit() -> None:
    hosts = repo_setup_hosts(
        [
            "registry.npmjs.org",
            "pkgs.example.org",
            "*.example.org",
            "*.org",
            "example.org",
            "evil.com",
            "a b",
            "PKGS.EXAMPLE.ORG.",
        ],
        ["registry.npmjs.org", "*.example.org"],
    )
    assert hosts.allowed == ("registry.npmjs.org", "pkgs.example.org", "*.example.org")
    assert [b.host for b in hosts.refused] == ["*.org", "example.org", "evil.com", "a b"]
    assert {b.reason for b in hosts.refused} == {REPO_HOST_REFUSED}
    assert repo_setup_hosts(["pypi.org"], []).allowed == ()  # default: repos add none


def test_the_readmes_ribbit_yml_example_parses_with_image_and_setup_hosts() -> None:
    readme = (Path(__file__).parents[4] / "README.md").read_text()
    section = readme.split("## Per-repository config: `.ribbit.yml`", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = parse_repo_config(example)
    assert config.setup_hosts == ["npm.pkg.example.org"]
    # As written, on a deployment's defaults (issue #35): the image it names is one the
    # docker backend allows with no operator setting (python:3.12 was refused there).
    assert config.image is not None and image_allowed(config.image, SandboxSettings())


def test_a_devcontainer_image_is_read_when_ribbit_yml_names_none(tmp_path: Path) -> None:
    _devcontainer(tmp_path / "nested", {"name": "x", "image": "node:20"})
    request = image_request(RepoConfig(), tmp_path / "nested")
    assert request == ImageRequest(source=".devcontainer/devcontainer.json", image="node:20")
    top = tmp_path / "top"
    top.mkdir()
    (top / ".devcontainer.json").write_text('{"image": "node:20", // a comment\n}')
    assert image_request(RepoConfig(), top) == ImageRequest(
        source=".devcontainer.json", image="node:20"
    )
    # Within the deployment's allow-list like any other image, refused before the engine.
    with pytest.raises(RepoImageError, match=r"node:20.*devcontainer\.json.*does not allow"):
        choose_image(SANDBOX, RepoConfig(), top, repo="r", backend="docker", client=NoEngine())


class ProbeEngine:
    """An engine whose probe runs print what ``outputs`` holds, one per run."""

    def __init__(self, outputs: list[bytes]) -> None:
        self.outputs = outputs
        self.runs = 0
        self.containers = self

    def run(self, image: str, command: list[str], **kwargs: object) -> bytes:
        self.runs += 1
        return self.outputs.pop(0)


def test_a_probe_whose_output_was_lost_is_run_again_not_taken_for_a_missing_shell() -> None:
    """A probe that exits 0 prints its mark line; none means the engine lost the output
    (seen once on Podman under load), so the image is probed again before any verdict."""
    from worker.sandbox.repoimage import PROBE_ATTEMPTS, _probe

    engine = ProbeEngine([b"", b"RIBBIT-MISSING:\n"])
    assert _probe(engine, "img") == ""
    assert engine.runs == 2
    engine = ProbeEngine([b"", b"RIBBIT-MISSING: /usr/bin/python3 uid-1000-user\n"])
    assert _probe(engine, "img") == "/usr/bin/python3, uid-1000-user"
    # An image whose shell prints nothing at all is still refused, after the last attempt.
    engine = ProbeEngine([b""] * PROBE_ATTEMPTS)
    assert _probe(engine, "img") == "a working /bin/sh (the probe printed nothing)"
    assert engine.runs == PROBE_ATTEMPTS
