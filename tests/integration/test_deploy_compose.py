"""deploy/compose.yaml and deploy/Dockerfile: validated, not just parsed.

compose.yaml is checked against the Compose Specification's JSON schema (vendored
in deploy/schemas) and resolved by `podman-compose config` (PyPI's podman-compose;
no Docker Compose is installable here). The Dockerfile is parsed with
dockerfile-parse (no Dockerfile linter such as hadolint is installable here);
the image is not built in tests: its torch install alone takes far longer than a
test may, so the build is documented in deploy/README.md instead.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support import GITHUB_SECRET, GITLAB_TOKEN, OTHER_SECRET, require_service
from worker.settings import WorkerSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _setting_exists(secret: str) -> bool:
    """ribbit_github__webhook_secret -> WorkerSettings.github.webhook_secret exists."""
    parts = secret.removeprefix("ribbit_").split("__")
    fields: Any = WorkerSettings.model_fields
    for i, part in enumerate(parts):
        if part not in fields:
            return False
        if i < len(parts) - 1:
            fields = fields[part].annotation.model_fields
    return True


def test_deploy_compose_matches_compose_spec_schema() -> None:
    schema = json.loads((DEPLOY / "schemas" / "compose-spec.json").read_text())
    data = _compose()
    # The top-level `name` came into the spec after this schema's revision;
    # podman-compose (below) resolves it.
    assert data.pop("name") == "ribbit"
    errors = sorted(
        jsonschema.Draft201909Validator(schema).iter_errors(data), key=lambda e: list(e.path)
    )
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_deploy_compose_schema_rejects_a_broken_file() -> None:
    schema = json.loads((DEPLOY / "schemas" / "compose-spec.json").read_text())
    broken = _compose()
    broken.pop("name")
    broken["services"]["web"]["healthcheck"]["retries"] = "three"
    broken["services"]["web"]["no_such_key"] = 1
    assert len(list(jsonschema.Draft201909Validator(schema).iter_errors(broken))) >= 2


def test_deploy_compose_services_and_profiles() -> None:
    services = _compose()["services"]
    assert set(services) == {
        "db-upgrade",
        "web",
        "worker",
        "worker-gpu",
        "rollout-worker",
        "beat",
        "trainer",
        "redis",
        "postgres",
        "model-pull",
        "vllm",
        "sglang",
        "sglang-chat-template",
        "prometheus",
    }
    # Prometheus reads the rules and config the monitoring tests check, and scrapes the
    # port the workers serve their metrics on.
    assert services["prometheus"]["profiles"] == ["monitoring"]
    assert "./prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    for name in ("worker", "worker-gpu"):
        assert services[name]["environment"]["RIBBIT_METRICS__WORKER_PORT"] == "9808", name
    assert services["rollout-worker"]["profiles"] == ["train"]
    assert "--only-rollouts" in services["rollout-worker"]["command"]
    assert services["web"]["command"] == ["serve", "--no-worker"]
    assert services["worker"]["command"][0] == "worker"
    assert services["worker-gpu"]["profiles"] == ["gpu"]
    assert services["trainer"]["profiles"] == ["train"]
    gpu = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"]
    assert "beat" in services["beat"]["command"]
    for name in ("web", "worker", "worker-gpu", "redis", "postgres"):
        assert "test" in services[name]["healthcheck"], name
    # Only what runs episodes (the workers and the trainer's own rollouts) reaches the
    # sandbox engine's socket, as the docker backend at the path it is mounted on.
    for name in ("web", "beat", "db-upgrade", "model-pull"):
        assert not any("sock" in v for v in services[name].get("volumes", [])), name
    for name in ("worker", "worker-gpu", "rollout-worker", "trainer"):
        [socket] = [v for v in services[name]["volumes"] if "sock" in v]
        env = services[name]["environment"]
        assert env["RIBBIT_SANDBOX__BACKEND"] == "docker", name
        assert env["RIBBIT_SANDBOX__DOCKER_URL"] == "unix://" + socket.split(":")[-1], name
    for name in ("web", "worker", "beat"):
        assert {"data:/data", "models:/models"} <= set(services[name]["volumes"]), name


def test_deploy_compose_builds_the_gpu_image_with_the_gpu_extras() -> None:
    """Every service on the GPU image builds it with CUDA torch and the `gpu` extra (the
    model's fast linear-attention kernels); the CPU image keeps the Dockerfile's defaults."""
    services = _compose()["services"]
    built = {name: s for name, s in services.items() if "build" in s}
    on_gpu = {name for name, s in built.items() if s["image"] == "${RIBBIT_GPU_IMAGE:-ribbit:gpu}"}
    assert on_gpu == {"worker-gpu", "rollout-worker", "trainer"}
    for name, service in built.items():
        args = service["build"]["args"]
        if name in on_gpu:
            assert args["TORCH_VARIANT"] == "${RIBBIT_TORCH_VARIANT:-cu126}", name
            assert args["RIBBIT_EXTRAS"] == "postgres,gpu", name
        else:
            assert args == {"TORCH_VARIANT": "cpu"}, name


def test_deploy_compose_upgrades_the_schema_once_before_anything_opens_it() -> None:
    """`ribbit db upgrade` is a one-shot service; every service that opens the database
    starts after it exited 0 (none upgrades the schema itself on PostgreSQL)."""
    services = _compose()["services"]
    upgrade = services["db-upgrade"]
    assert upgrade["command"] == ["db", "upgrade"] and upgrade["restart"] == "no"
    assert upgrade["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "ribbit_database_url" in upgrade["secrets"]
    for name in ("web", "worker", "worker-gpu", "rollout-worker", "trainer"):
        assert services[name]["depends_on"]["db-upgrade"] == {
            "condition": "service_completed_successfully"
        }, name
        env = services[name].get("environment", {})
        assert "RIBBIT_DATABASE_AUTO_UPGRADE" not in env, name


def test_deploy_compose_secrets_are_files_and_name_real_settings() -> None:
    data = _compose()
    for name, spec in data["secrets"].items():
        assert set(spec) == {"file"}, name
        if name.startswith("ribbit_"):
            assert _setting_exists(name), f"secret {name} names no setting"
    for service in data["services"].values():
        env = service.get("environment", {})
        assert not any(k.endswith(("TOKEN", "SECRET", "PASSWORD")) for k in env), env
        assert not any("://" in str(v) and "@" in str(v) for v in env.values()), env


def test_deploy_settings_read_container_secret_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ribbit_github__webhook_secret").write_text(GITHUB_SECRET + "\n")
    (secrets / "ribbit_admin_token").write_text(GITLAB_TOKEN)
    (secrets / "ribbit_database_url").write_text("postgresql+psycopg://u:p@db/ribbit\n")
    settings = WorkerSettings(_secrets_dir=secrets)  # type: ignore[call-arg]
    assert settings.github.webhook_secret is not None
    assert settings.github.webhook_secret.get_secret_value() == GITHUB_SECRET
    assert settings.admin_token is not None
    assert settings.admin_token.get_secret_value() == GITLAB_TOKEN
    assert settings.database_url == "postgresql+psycopg://u:p@db/ribbit"
    monkeypatch.setenv("RIBBIT_ADMIN_TOKEN", OTHER_SECRET)
    overridden = WorkerSettings(_secrets_dir=secrets)  # type: ignore[call-arg]
    assert overridden.admin_token is not None
    assert overridden.admin_token.get_secret_value() == OTHER_SECRET


def _flags(command: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").partition("=")[::2] for a in command if a.startswith("--"))


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_deploy_compose_inference_servers(name: str) -> None:
    services = _compose()["services"]
    server = services[name]
    flags = _flags(server["command"])
    assert server["profiles"] == [name]
    # The model's own parsers and chat template (on SGLang behind the prefix that hands
    # it the tools as sent, written by sglang-chat-template before the server starts).
    assert flags["tool-call-parser"] == "qwen3_coder" and flags["reasoning-parser"] == "qwen3"
    if name == "vllm":
        assert "chat-template" not in flags
    else:
        step = services["sglang-chat-template"]
        assert step["entrypoint"][-1] == "worker.agent.policy.sglang_template"
        assert step["command"][0] == "/models/" + flags["served-model-name"]
        assert "sglang-template:/templates:ro" in server["volumes"]
        assert flags["chat-template"] == "/templates/" + step["command"][1].rsplit("/", 1)[1]
        assert server["depends_on"]["sglang-chat-template"] == {
            "condition": "service_completed_successfully"
        }
    assert "enable-lora" in flags and int(flags["max-lora-rank"]) >= 8
    if name == "vllm":  # rollouts' log-probs after temperature, as the learner scores them
        assert flags["logprobs-mode"] == "processed_logprobs"
    # Served under the model id, so RIBBIT_MODEL__MODEL means the same on both paths.
    assert flags["served-model-name"] == "microsoft/FrogNano-4B-2609"
    weights = flags.get("model-path") or server["command"][0]
    assert weights == "/models/" + flags["served-model-name"]
    assert server["environment"]["HF_HUB_OFFLINE"] == "1"
    assert {"models:/models:ro", "data:/data:ro"} <= set(server["volumes"])
    assert server["networks"] == ["inference"]  # internal: nothing out
    assert "/v1/models" in " ".join(server["healthcheck"]["test"])
    assert "ports" not in server
    if name == "vllm":
        assert "enable-auto-tool-choice" in flags
        assert server["environment"]["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    else:
        assert flags["lora-target-modules"] == "all"  # LoRA with no adapter at start


def test_deploy_compose_weights_pulled_once_and_hub_offline_elsewhere() -> None:
    data = _compose()
    assert data["networks"]["inference"] == {"internal": True}
    services = data["services"]
    pull = services["model-pull"]
    assert pull["command"] == ["model", "pull"] and pull["profiles"] == ["setup"]
    assert pull["environment"]["HF_HUB_OFFLINE"] == "0"
    for name in ("web", "worker", "worker-gpu", "rollout-worker", "beat", "trainer"):
        env = services[name].get("environment", data["x-ribbit"]["environment"])
        assert env["HF_HUB_OFFLINE"] == "1", name
        assert env["RIBBIT_MODEL__WEIGHTS_DIR"] == "/models", name
    # Jobs ask the server, and the trainer promotes versions and runs `--rollouts server`
    # through it.
    for name in ("worker", "worker-gpu", "rollout-worker", "trainer"):
        assert "inference" in services[name]["networks"], name
    assert "networks" not in services["web"]  # the web tier never talks to the model


@pytest.mark.integration
def test_deploy_compose_resolves_with_podman_compose(tmp_path: Path) -> None:
    binary = shutil.which("podman-compose") or str(Path(sys.executable).parent / "podman-compose")
    require_service(Path(binary).exists(), "podman-compose (pip install podman-compose)")
    workdir = tmp_path / "deploy"
    workdir.mkdir()
    shutil.copy(COMPOSE, workdir / "compose.yaml")
    (workdir / "secrets").mkdir()
    for name in _compose()["secrets"]:
        (workdir / "secrets" / name).write_text("x")
    # Every profile the file uses, read from it, so a new one cannot go unresolved.
    profiles = sorted({p for s in _compose()["services"].values() for p in s.get("profiles", [])})
    assert {"gpu", "train", "setup", "vllm", "sglang", "monitoring"} <= set(profiles)
    out = subprocess.run(
        [binary, "-f", "compose.yaml"]
        + [a for p in profiles for a in ("--profile", p)]
        + ["config"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)
    assert {
        "db-upgrade",
        "web",
        "worker",
        "worker-gpu",
        "trainer",
        "beat",
        "vllm",
        "sglang",
        "sglang-chat-template",
        "model-pull",
        "rollout-worker",
        "prometheus",
    } == set(resolved["services"]) - {"redis", "postgres"}
    assert resolved["services"]["worker"]["command"] == [
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        "2",
    ]
    assert (
        resolved["services"]["worker"]["environment"]["RIBBIT_BROKER_URL"] == "redis://redis:6379/0"
    )


# -- Dockerfile ---------------------------------------------------------------------------


def _dockerfile() -> Any:
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(path=str(DEPLOY / "Dockerfile"))
    return parser


def test_deploy_dockerfile_is_multistage_nonroot_with_healthcheck() -> None:
    parser = _dockerfile()
    instructions = parser.structure
    froms = [i["value"] for i in instructions if i["instruction"] == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE} AS runtime"]
    args = {
        i["value"].split("=", 1)[0]: i["value"].split("=", 1)[-1]
        for i in instructions
        if i["instruction"] == "ARG"
    }
    base = args["PYTHON_IMAGE"]
    assert ":" in base.rsplit("/", 1)[-1] and not base.endswith(":latest"), base
    assert args["TORCH_VARIANT"] == "cpu"
    # The CPU image takes the worker's extras; a GPU build names `gpu` (compose.yaml).
    assert args["RIBBIT_EXTRAS"] == "postgres,worker"
    final = instructions[[i["instruction"] for i in instructions].index("FROM", 1) :]
    users = [i["value"] for i in final if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert any(i["instruction"] == "HEALTHCHECK" and "/healthz" in i["value"] for i in final)
    entry = next(i["value"] for i in final if i["instruction"] == "ENTRYPOINT")
    cmd = next(i["value"] for i in final if i["instruction"] == "CMD")
    assert json.loads(entry)[-1] == "ribbit" and json.loads(cmd) == ["serve", "--no-worker"]
    # torch comes from the variant's own index, before the project pulls in PyPI's.
    runs = [i["value"] for i in instructions if i["instruction"] == "RUN"]
    torch_at = next(
        n for n, r in enumerate(runs) if "download.pytorch.org/whl/${TORCH_VARIANT}" in r
    )
    project_at = next(
        n
        for n, r in enumerate(runs)
        if 'pip install -c requirements.lock ".[${RIBBIT_EXTRAS}]"' in r
    )
    assert torch_at < project_at


def test_deploy_dockerfile_copies_only_what_the_package_needs() -> None:
    copies = [i["value"] for i in _dockerfile().structure if i["instruction"] == "COPY"]
    sources = {c.split()[0] for c in copies if not c.startswith("--from")}
    assert sources <= {"pyproject.toml", "bot", "worker", "trainer", "deploy/semgrep.lock"}
    assert any("deploy/requirements.lock" in c.split() for c in copies)
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "**" in ignore  # everything not re-included is left out of the build context
    assert {"!bot/**", "!worker/**", "!trainer/**", "!pyproject.toml"} <= set(ignore)
    assert {"!deploy/requirements.lock", "!deploy/semgrep.lock"} <= set(ignore)


def test_deploy_dockerfile_puts_semgrep_in_a_venv_of_its_own() -> None:
    """Semgrep is installed from its own lock into its own venv, which the runtime stage
    copies and names as the gate's scanner; the app's install never brings it."""
    instructions = _dockerfile().structure
    runs = [i["value"] for i in instructions if i["instruction"] == "RUN"]
    (semgrep_run,) = [r for r in runs if "semgrep" in r]
    assert "python -m venv /opt/ribbit-semgrep" in semgrep_run
    assert "/opt/ribbit-semgrep/bin/pip install -r /tmp/semgrep.lock" in semgrep_run
    copies = [i["value"] for i in instructions if i["instruction"] == "COPY"]
    assert "deploy/semgrep.lock /tmp/semgrep.lock" in copies
    assert "--from=build /opt/ribbit-semgrep /opt/ribbit-semgrep" in copies
    final = instructions[[i["instruction"] for i in instructions].index("FROM", 1) :]
    env = " ".join(i["value"] for i in final if i["instruction"] == "ENV")
    assert "RIBBIT_GATES__SEMGREP_BIN=/opt/ribbit-semgrep/bin/semgrep" in env


def _lock(name: str) -> dict[str, tuple[str, set[str]]]:
    """A lock file: name -> (version, the names that require it, per `# via`)."""
    from packaging.utils import canonicalize_name

    pins: dict[str, tuple[str, set[str]]] = {}
    for line in (DEPLOY / name).read_text().splitlines():
        if line and not line.startswith("#"):
            pin, _, via = line.partition("  # via ")
            package, version = pin.split("==")
            parents = {canonicalize_name(p) for p in via.split(", ")} if via else set()
            pins[canonicalize_name(package)] = (version, parents)
    return pins


def _rooted_at(pins: dict[str, tuple[str, set[str]]], root: str) -> list[str]:
    """The pins nothing in the lock (nor the root) requires: what a lock must not hold."""
    stray = []
    for name, (_, parents) in pins.items():
        if name != root and (not parents or not parents <= set(pins) | {root}):
            stray.append(f"{name} (via {', '.join(sorted(parents)) or 'nothing'})")
    return stray


def test_deploy_app_lock_holds_neither_semgrep_nor_its_pins() -> None:
    """Semgrep is isolated from the app's pins: the app's lock names no semgrep, and every
    pin in it is required by ribbit or by another pin of it, so nothing only Semgrep needs
    (its OpenTelemetry, glom, mcp, ...) is left constraining the app."""
    import tomllib

    app = _lock("requirements.lock")
    assert "semgrep" not in app
    assert not any("semgrep" in parents for _, parents in app.values())
    assert not _rooted_at(app, "ribbit")
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra
    assert not [r for r in declared if r.lower().startswith("semgrep")], declared
    # What only Semgrep needs is in its own lock and not in the app's.
    only_semgrep = set(_lock("semgrep.lock")) - set(app)
    assert {"semgrep", "glom", "opentelemetry-api"} <= only_semgrep


def test_deploy_semgrep_lock_is_semgrep_and_what_it_needs() -> None:
    pins = _lock("semgrep.lock")
    assert pins["semgrep"][1] == set()  # the root
    assert "ribbit" not in pins
    assert not _rooted_at(pins, "semgrep")


def test_deploy_lock_rooted_check_catches_a_stray_pin() -> None:
    """The check above can fail: a pin left behind by a removed dependency, or one whose
    parent is not in the lock, is named."""
    pins = {"flask": ("3.1", {"ribbit"}), "glom": ("25.12.0", {"semgrep"}), "x": ("1", set())}
    assert _rooted_at(pins, "ribbit") == ["glom (via semgrep)", "x (via nothing)"]


def test_makefile_installs_semgrep_apart_with_the_app() -> None:
    """`make install`/`install-dev` (and so serve, test and .ci/run) build Semgrep's venv
    beside the app's, from its lock, and only when the lock changed (a stamp)."""
    out = subprocess.run(
        ["make", "-n", "-B", "install", "install-dev", "VENV=/nonexistent/app"],
        cwd=DEPLOY.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "-m venv --clear /nonexistent/app-semgrep" in out.stdout
    assert "/nonexistent/app-semgrep/bin/pip install -q -r deploy/semgrep.lock" in out.stdout
    assert "touch /nonexistent/app-semgrep/.installed" in out.stdout


def test_deploy_lock_pins_every_requirement_of_the_image_within_pyproject() -> None:
    """The image installs from deploy/requirements.lock: it must pin each package the
    pyproject asks for (base, worker, postgres and gpu extras; torch comes from its own
    index), at a version the pyproject admits."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock = {name: version for name, (version, _) in _lock("requirements.lock").items()}
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    # The GPU image's extras too: both variants install from the one lock.
    wanted = [*project["dependencies"], *extras["worker"], *extras["postgres"], *extras["gpu"]]
    for text in wanted:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name == "ribbit":
            continue  # an extra naming another (gpu = ribbit[worker] + ...), listed here too
        if name == "torch":
            assert name not in lock  # installed first, per variant, from its own index
            continue
        assert name in lock, f"{name} is not in deploy/requirements.lock (scripts/lock.sh)"
        assert req.specifier.contains(lock[name], prereleases=True), (name, lock[name])
