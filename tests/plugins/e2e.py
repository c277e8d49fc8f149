"""Fixtures for end-to-end tests: the bot deployed as in production (web app on a
loopback port, a Celery worker on Redis), aimed at the local forge, with the replay
policy playing a trajectory recorded by the same agent loop."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from werkzeug.serving import make_server

from tests.fakes import LocalDirSandbox, ScriptedPolicy, make_git_repo
from tests.plugins.forge import BOT_LOGIN, settings_for
from tests.support import GITHUB_SECRET, GITLAB_TOKEN, require_service, serving
from tests.watch_attacks import GC_HOOK

REPO_FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add_zero():\n"
    "    assert add(1, 0) == 1\n",
    ".ribbit.yml": "test: python3 -m pytest -q -p no:cacheprovider\nlabels: [bot]\n"
    "reviewers: [maya]\n",
}
ISSUE = ("add() subtracts", "calc.add(2, 3) returns -1, it should return 5.")


def xml_call(name: str, **args: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


GOOD_SCRIPT = [
    "<think>\nRead the code first.\n</think>\n" + xml_call("Read", file_path="calc.py"),
    xml_call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
    xml_call(
        "Write",
        file_path="tests/test_add.py",
        content="from calc import add\n\n\ndef test_add_two_numbers():\n"
        "    assert add(2, 3) == 5\n",
    ),
    "Fixed add() to add, and added a test for it.",
]
# Issue #31: a docs-only "fix" for a code bug. Nothing blocks it, nothing shows a fix.
DOCS_ONLY_SCRIPT = [
    xml_call("Read", file_path="calc.py"),
    xml_call(
        "Write",
        file_path="NOTES.md",
        content="# calc\n\n`add(a, b)` returns the sum of `a` and `b`.\n",
    ),
    "Documented add().",
]
# Issue #31: a forged run. add() stays broken; a hook found through the garbage
# collector on the live pytest config turns the new test's failure into a pass.
FORGED_SCRIPT = [
    xml_call(
        "Write", file_path="calc.py", content=GC_HOOK + "\n\ndef add(a, b):\n    return a - b\n"
    ),
    xml_call(
        "Write",
        file_path="tests/test_add.py",
        content="from calc import add\n\n\ndef test_add_two_numbers():\n"
        "    assert add(2, 3) == 5\n",
    ),
    "Fixed add() and added a test for it.",
]
INSECURE_SCRIPT = [
    xml_call(
        "Edit",
        file_path="calc.py",
        old_string="    return a - b",
        new_string="    return eval(f'{a} + {b}')",
    ),
    "Done.",
]


def record(
    script: list[str],
    path: Path,
    tmp_path: Path,
    *,
    files: dict[str, str] | None = None,
    issue: tuple[str, str] = ISSUE,
) -> Path:
    """Record a trajectory the way the worker will replay it: the same agent loop, on
    ``files`` (the calc repo's by default) and ``issue``."""
    from worker.agent import AgentTask, run_agent
    from worker.settings import AgentSettings

    source = tmp_path / f"rec-{path.stem}"
    make_git_repo(source, REPO_FILES if files is None else files)
    with LocalDirSandbox(source) as sandbox:
        result = run_agent(
            AgentTask(title=issue[0], body=issue[1]),
            sandbox,
            ScriptedPolicy(script),
            AgentSettings(),
        )
    assert result.exit_reason == "agent", result.error
    result.trajectory.write_jsonl(path, append=False)
    return path


def wait_for(predicate: Any, timeout: float = 120.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not met within {timeout}s")


@pytest.fixture
def sandbox_backend(request: pytest.FixtureRequest) -> str:
    """The deployment's sandbox backend: bubblewrap, or what the test parametrizes
    indirectly (``@pytest.mark.parametrize("sandbox_backend", [...], indirect=True)``)."""
    from worker.sandbox import check_backends
    from worker.settings import SandboxSettings

    backend: str = getattr(request, "param", "bubblewrap")
    if backend == "docker":
        # The session's engine and image (tests/plugins/sandbox.py), built once.
        request.getfixturevalue("sandbox_image")
        return backend
    checks = {c.name: c for c in check_backends(SandboxSettings())}
    bwrap = checks.get("bubblewrap")
    require_service(bool(bwrap and bwrap.ok), "bubblewrap sandbox")
    return "bubblewrap"


def _sandbox_update(request: pytest.FixtureRequest, backend: str) -> dict[str, Any]:
    """The sandbox settings a deployment on ``backend`` needs beyond its name: for docker,
    the session's engine and image; the limits stay the production defaults."""
    if backend != "docker":
        return {"backend": backend}
    # The image trusts Debian's CAs only; where the registries are reached through a
    # TLS-inspecting gateway (as on these test machines), the deployment hands setup the
    # host's bundle, as an operator would (RIBBIT_SANDBOX__SETUP_CA_BUNDLE). Bubblewrap
    # sees the host's /etc/ssl already.
    host_ca = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
    return {
        "backend": backend,
        "docker_url": request.getfixturevalue("podman_socket"),
        "image": request.getfixturevalue("sandbox_image"),
        "setup_ca_bundle": host_ca if host_ca.is_file() else None,
    }


class Deployment:
    """The bot as deployed: web app on a loopback port, a Celery worker on Redis."""

    def __init__(self, settings: Any, *, port: int = 0) -> None:
        from celery.contrib.testing.worker import start_worker

        from bot.web import create_app
        from worker.celery_app import create_celery

        self.settings = settings
        self.app = create_app(settings)
        self.server = make_server("127.0.0.1", port, self.app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._serving = contextlib.ExitStack()
        self.celery = create_celery(settings)
        self.closed = False
        self.worker_cm = start_worker(
            self.celery,
            pool="threads",
            concurrency=2,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=30,
        )

    @property
    def store(self) -> Any:
        return self.app.extensions["ribbit"].store

    def __enter__(self) -> Deployment:
        self._serving.enter_context(serving(self.server))
        self.worker_cm.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker and the web app (safe twice); the store and queue stay."""
        if self.closed:
            return
        self.closed = True
        self.worker_cm.__exit__(None, None, None)
        self._serving.close()
        self.app.extensions["ribbit"].db.dispose()


@pytest.fixture
def deployment_for(
    forge_world: Any,
    tmp_path: Path,
    redis_url: str,
    sandbox_backend: str,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., Deployment]]:
    """``deployment_for(script)`` deploys the bot replaying ``script`` (recorded on
    ``repo_files`` for ``issue``; on ``port=`` when the settings must name its URL
    beforehand); deploying again
    (a new model, say) should follow ``close()`` of the previous one, which shares the
    store and the queue."""
    opened: list[Deployment] = []
    sandbox = _sandbox_update(request, sandbox_backend)

    def build(
        script: list[str],
        *,
        port: int = 0,
        repo_files: dict[str, str] | None = None,
        issue: tuple[str, str] = ISSUE,
        **extra: Any,
    ) -> Deployment:
        base = settings_for(
            forge_world.forge,
            tmp_path / "data",
            github_token=forge_world.bot.token,
            gitlab_token=forge_world.bot.token,
        )
        replay = record(
            script,
            tmp_path / f"replay-{len(opened)}.jsonl",
            tmp_path,
            files=repo_files,
            issue=issue,
        )
        settings = base.model_copy(
            update={
                "broker_url": redis_url,
                "github": base.github.model_copy(
                    update={"webhook_secret": SecretStr(GITHUB_SECRET)}
                ),
                "gitlab": base.gitlab.model_copy(update={"webhook_token": SecretStr(GITLAB_TOKEN)}),
                "model": base.model.model_copy(update={"policy": "replay", "replay_file": replay}),
                "sandbox": base.sandbox.model_copy(update=sandbox),
                **extra,
            }
        )
        dep = Deployment(settings, port=port)
        dep.__enter__()
        opened.append(dep)
        forge_world.forge.configure_webhooks(
            github=(f"{dep.url}/webhooks/github", GITHUB_SECRET),
            gitlab=(f"{dep.url}/webhooks/gitlab", GITLAB_TOKEN),
        )
        return dep

    yield build
    for dep in opened:
        dep.close()


def new_repo(forge_world: Any, kind: str) -> str:
    full_name = "acme/calc" if kind == "github" else "acme/tools/calc"
    forge_world.forge.create_repo(kind, full_name, files=REPO_FILES)
    forge_world.forge.add_collaborator(kind, full_name, BOT_LOGIN, "write")
    forge_world.forge.add_collaborator(kind, full_name, "maya", "maintain")
    return full_name


def label_issue(forge_world: Any, kind: str, repo: str, actor: str = "maya") -> int:
    issue = forge_world.forge.create_issue(kind, repo, title=ISSUE[0], body=ISSUE[1], author=actor)
    delivery = forge_world.forge.add_label(kind, repo, issue.number, "ribbit", actor=actor)
    assert delivery is not None and delivery.status_code == 202, delivery
    return int(issue.number)


def bot_comments(forge_world: Any, kind: str, repo: str, number: int) -> list[Any]:
    return [c for c in forge_world.forge.comments(kind, repo, number) if c.author == BOT_LOGIN]
