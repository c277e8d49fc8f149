"""The README's quickstart, followed step by step on the local forge (issue #36).

The steps and their command blocks are read from README.md (tests.support.quickstart_steps)
and run in order, each line of each block through exactly one rule of RULES: a line no
rule matches fails the test, as does a step the test has no plan for, so a changed
quickstart cannot leave this test running nothing. What the test does differently from
a person on a fresh machine is in RULES and EXTRA_SETTINGS, each with its reason; the
rest runs as written, on the embedded defaults (SQLite, the embedded broker, bubblewrap),
in a `ribbit serve` process, and ends with a draft pull request on the local forge's
GitHub and a draft merge request on its GitLab, from a labelled issue.

What this does not show: the apt packages being installed (they are checked present),
the hub download (weights come from a folder), the real model (a recorded trajectory
is replayed), the CPU torch wheel being downloaded (the command the Makefile would run
is checked, against a stand-in for PyTorch's CPU index), and TLS in front of the bot.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.forge.server import LocalForge
from tests.plugins.e2e import GOOD_SCRIPT, ISSUE, REPO_FILES, record, wait_for
from tests.plugins.forge import BOT_LOGIN
from tests.plugins.services import free_port
from tests.support import QuickstartStep, quickstart_steps, torch_cpu_index

# The limits below are ceilings for a hang, never what a passing run needs: about a minute
# alone here, but `ribbit serve` has taken minutes to answer /healthz on a loaded two-core
# machine, and every command a step runs shares that machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
STEP_LIMIT_S = 600

ROOT = Path(__file__).resolve().parents[2]
MODEL = "microsoft/FrogNano-4B-2609"
REPOS = {"github": "acme/calc", "gitlab": "acme/tools/calc"}


@dataclass(frozen=True)
class Rule:
    """How the test runs a quickstart line that matches ``pattern``, and why that way."""

    pattern: str
    reason: str
    action: str  # the Quickstart method that carries the line out


RULES = (
    Rule(
        r"sudo apt-get install -y (?P<packages>[a-z0-9 .+-]+)",
        "checked installed (dpkg), not installed: a test does not run apt",
        "packages_present",
    ),
    Rule(
        r"git clone <Ribbit's repository> ribbit && cd ribbit",
        "the checkout under test is the clone; commands run in a folder of their own whose "
        ".venv is the test's, so ribbit.env and the data stay out of the checkout",
        "noop",
    ),
    Rule(
        r"make install",
        "`make -n install`: the command the Makefile would run is asserted to take torch "
        "from the CPU index (a stand-in: PyTorch's index is unreachable here); nothing is "
        "installed, the venv is the test's",
        "install_takes_cpu_torch",
    ),
    Rule(
        r"\.venv/bin/ribbit model pull",
        "with `--from` a tiny model's folder (the step's own way from a copy on disk): no "
        "hub is reachable here",
        "pull_weights",
    ),
    Rule(
        r"ribbit\.example\.com \{",  # step 4's Caddy site block, whole
        "not run: the local forge posts to the bot's loopback address, no TLS between them; "
        "the block is checked to proxy the webhook and review paths to the bot's address",
        "reverse_proxy",
    ),
    Rule(
        r"export (?P<name>RIBBIT_\w+)=(?P<value>\S+|'[^']*')(?: +#.*)?",
        "into ribbit.env with secrets generated here, the bot's loopback URL for the "
        "example address and the local forge's repositories for OWNER/REPO, GROUP/PROJECT",
        "export",
    ),
    Rule(
        r"\.venv/bin/ribbit github-app create --webhook-url \S+",
        "the step's other way, a bot account's token and a repository webhook: an App is "
        "registered on github.com, which is not reachable here",
        "github_bot_account",
    ),
    Rule(r"source ribbit\.env", "as written: every later command runs after it", "source_env"),
    Rule(
        r"\.venv/bin/ribbit doctor (?P<args>.+)",
        "the local forge's repositories for OWNER/REPO and GROUP/PROJECT; it must pass",
        "doctor",
    ),
    Rule(
        r"make serve",
        "`.venv/bin/ribbit serve` in the background: what the serve target runs once "
        "`make install` is done (asserted with `make -n serve`)",
        "serve",
    ),
)

# Settings the quickstart does not name that a test must set, with why.
EXTRA_SETTINGS = {
    "RIBBIT_GITHUB__API_URL": "the local forge's GitHub API, not api.github.com",
    "RIBBIT_GITLAB__URL": "the local forge's GitLab (step 7's self-managed GitLab)",
    "RIBBIT_PORT": "a free port: 8080 may be taken on a shared test host",
    "RIBBIT_MODEL__POLICY": "replay, a recorded trajectory instead of the 4B model",
    "RIBBIT_MODEL__REPLAY_FILE": "the trajectory GOOD_SCRIPT records (tests/plugins/e2e.py)",
    "RIBBIT_SANDBOX__BACKEND": "bubblewrap, what auto picks on a host with no container "
    "engine, pinned so a test host's engine does not change the run",
}

# The steps with no command block, and what the test does for each.
FORGE_STEPS = {
    3: "nothing: it says what hardware each serving option needs",
    7: "the GitLab token, bot username and URL into ribbit.env, the project webhook on "
    "the local forge",
    9: "`/ribbit help` on an issue, and the label is then there",
    10: "the label on an issue on each forge by a maintainer, then `ribbit jobs`",
}


class Quickstart:
    """A person following the quickstart on one machine: a folder to run commands in
    (their clone), a HOME (so the default data dir is a temp one), ribbit.env, and the
    `ribbit serve` process once started."""

    def __init__(self, tmp: Path, forge: LocalForge, replay: Path, weights: Path) -> None:
        self.tmp, self.forge, self.replay, self.weights = tmp, forge, replay, weights
        self.clone = tmp / "ribbit"
        self.clone.mkdir()
        (self.clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
        self.home = tmp / "home"
        self.home.mkdir()
        self.env_file = self.clone / "ribbit.env"
        self.env_file.write_text("")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.sourced = False
        self.secrets: dict[str, str] = {}
        self.serve_proc: subprocess.Popen[bytes] | None = None
        self.doctor_output = ""
        self.extra_settings: set[str] = set()
        self.step_text = ""  # the step being followed, whose prose some actions check

    # -- running commands as the person would --------------------------------------------

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RIBBIT_", "XDG_"))}
        # The checkout under test, not the venv's installed copy (PYTHONPATH comes first).
        env.update(HOME=str(self.home), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
        return env

    def sh(self, line: str, timeout: float = STEP_LIMIT_S) -> subprocess.CompletedProcess[str]:
        script = f"source ribbit.env && {line}" if self.sourced else line
        return subprocess.run(
            ["bash", "-c", script],
            cwd=self.clone,
            env=self.environ(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def setting(self, name: str, value: str, *, extra: bool = False) -> None:
        with self.env_file.open("a") as f:
            f.write(f"export {name}={shlex.quote(value)}\n")
        if extra:
            assert name in EXTRA_SETTINGS, name
            self.extra_settings.add(name)

    # -- the rules' actions ------------------------------------------------------------

    def noop(self, match: re.Match[str]) -> None:
        pass

    def packages_present(self, match: re.Match[str]) -> None:
        for package in match["packages"].split():
            done = subprocess.run(
                ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
            )
            assert done.stdout == "install ok installed", f"{package}: {done.stdout}"

    def install_takes_cpu_torch(self, match: re.Match[str]) -> None:
        with torch_cpu_index() as index:
            plan = self.make_n("install", TORCH_CPU_INDEX=index)
        [torch] = [line for line in plan if '"torch==' in line]
        assert torch.endswith(f'pip install -q --index-url {index} "torch==2.13.0"'), plan
        # torch goes in before Ribbit itself, so nothing pulls the CUDA build from PyPI.
        [ribbit] = [i for i, line in enumerate(plan) if "install -q -e '.[worker]'" in line]
        assert plan.index(torch) < ribbit, plan

    def make_n(self, target: str, **env: str) -> list[str]:
        # As a user's shell runs it, not as a child of CI's `make test`: a make inherits
        # its parent's flags and, one level down, prints "Entering/Leaving directory".
        parent = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}
        environ = {k: v for k, v in self.environ().items() if k not in parent}
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", target, f"VENV={self.tmp / 'fresh-venv'}"],
            cwd=ROOT,
            env={**environ, **env},
            capture_output=True,
            text=True,
            timeout=STEP_LIMIT_S,
            check=True,
        )
        return done.stdout.splitlines()

    def pull_weights(self, match: re.Match[str]) -> None:
        done = self.sh(f"{match[0]} --from {shlex.quote(str(self.weights))}")
        assert done.returncode == 0, done.stdout + done.stderr
        # Where the step says the weights go: DATA_DIR/models/<model id>, DATA_DIR by default.
        pulled = self.home / ".local/share/ribbit/models" / MODEL
        assert (pulled / "config.json").is_file(), done.stdout
        verified = self.sh(".venv/bin/ribbit model verify")
        assert verified.returncode == 0 and "match" in verified.stdout, verified.stdout

    def reverse_proxy(self, block: tuple[str, ...]) -> None:
        text = "\n".join(block)
        for path in ("/webhooks/*", "/review/*"):
            assert re.search(
                rf"handle {re.escape(path)} {{\s*reverse_proxy 127\.0\.0\.1:8080", text
            )
        assert "respond 404" in text  # everything else (/admin, /metrics) is not public

    def export(self, match: re.Match[str]) -> None:
        name, value = match["name"], match["value"]
        if value == "<generated>":
            # The step's own recipe: python3 -c "import secrets; print(secrets.token_urlsafe(32))"
            value = self.secrets[name] = secrets.token_urlsafe(32)
        value = value.strip("'").replace("https://ribbit.example.com", self.url)
        value = value.replace("OWNER/REPO", REPOS["github"])
        value = value.replace("GROUP/PROJECT", REPOS["gitlab"])
        assert "<" not in value and "example" not in value, (name, value)
        self.setting(name, value)

    def github_bot_account(self, match: re.Match[str]) -> None:
        assert "RIBBIT_GITHUB__TOKEN" in self.step_text and "Webhooks" in self.step_text
        self.setting("RIBBIT_GITHUB__TOKEN", self.forge.users[BOT_LOGIN].token)
        self.setting("RIBBIT_GITHUB__BOT_LOGIN", BOT_LOGIN)
        self.setting("RIBBIT_GITHUB__API_URL", self.forge.github_api_url, extra=True)
        secret = self.secrets["RIBBIT_GITHUB__WEBHOOK_SECRET"]
        self.forge.configure_webhooks(github=(f"{self.url}/webhooks/github", secret))

    def gitlab_token(self) -> None:
        for name in ("RIBBIT_GITLAB__TOKEN", "RIBBIT_GITLAB__BOT_USERNAME", "RIBBIT_GITLAB__URL"):
            assert name in self.step_text, name
        self.setting("RIBBIT_GITLAB__TOKEN", self.forge.users[BOT_LOGIN].token)
        self.setting("RIBBIT_GITLAB__BOT_USERNAME", BOT_LOGIN)
        self.setting("RIBBIT_GITLAB__URL", self.forge.gitlab_url, extra=True)
        token = self.secrets["RIBBIT_GITLAB__WEBHOOK_TOKEN"]
        self.forge.configure_webhooks(
            github=(f"{self.url}/webhooks/github", self.secrets["RIBBIT_GITHUB__WEBHOOK_SECRET"]),
            gitlab=(f"{self.url}/webhooks/gitlab", token),
        )

    def source_env(self, match: re.Match[str]) -> None:
        # The settings a test must add, in the same file, before anything reads it.
        self.setting("RIBBIT_PORT", str(self.port), extra=True)
        self.setting("RIBBIT_MODEL__POLICY", "replay", extra=True)
        self.setting("RIBBIT_MODEL__REPLAY_FILE", str(self.replay), extra=True)
        self.setting("RIBBIT_SANDBOX__BACKEND", "bubblewrap", extra=True)
        assert self.extra_settings == set(EXTRA_SETTINGS), self.extra_settings
        done = subprocess.run(
            ["bash", "-c", "set -eu; source ribbit.env"], cwd=self.clone, capture_output=True
        )
        assert done.returncode == 0, done.stderr
        self.sourced = True

    def doctor(self, match: re.Match[str]) -> None:
        args = match["args"].replace("OWNER/REPO", REPOS["github"])
        args = args.replace("GROUP/PROJECT", REPOS["gitlab"])
        done = self.sh(f".venv/bin/ribbit doctor {args}")
        self.doctor_output = done.stdout
        assert done.returncode == 0, done.stdout + done.stderr
        for part in ("database", "broker: embedded", "jobs will use bubblewrap", "semgrep"):
            assert part in done.stdout, done.stdout
        for kind, repo in REPOS.items():
            assert f"[ok  ] {kind} access to {repo}" in done.stdout, done.stdout

    def serve(self, match: re.Match[str]) -> None:
        assert self.make_n("serve", PIP_TORCH_ARGS="")[-1] == (
            f"{self.tmp / 'fresh-venv'}/bin/ribbit serve"
        )
        log = (self.tmp / "serve.log").open("w")
        self.serve_proc = subprocess.Popen(
            ["bash", "-c", "source ribbit.env && exec .venv/bin/ribbit serve"],
            cwd=self.clone,
            env=self.environ(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # What the step says answers once `make serve` is up.
        wait_for(
            self.healthy, timeout=STEP_LIMIT_S, what="/healthz with the embedded worker running"
        )

    def healthy(self) -> bool:
        assert self.serve_proc is not None and self.serve_proc.poll() is None, self.serve_log()
        try:
            health = requests.get(f"{self.url}/healthz", timeout=5)
        except requests.ConnectionError:
            return False
        embedded = health.json().get("embedded", {}) if health.status_code == 200 else {}
        return bool(embedded) and all(p["state"] == "running" for p in embedded.values())

    def serve_log(self) -> str:
        path = self.tmp / "serve.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self.serve_proc is not None and self.serve_proc.poll() is None:
            os.killpg(self.serve_proc.pid, signal.SIGTERM)
            try:
                self.serve_proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.serve_proc.pid, signal.SIGKILL)
                self.serve_proc.wait(timeout=30)

    # -- the steps with no command block ---------------------------------------------------

    def first_label(self) -> None:
        assert "/ribbit help" in self.step_text
        kind, repo = "github", REPOS["github"]
        issue = self.forge.create_issue(kind, repo, title="Hello", body="", author="maya")
        _, delivery = self.forge.comment_as(
            kind, repo, issue.number, author="maya", body="/ribbit help"
        )
        assert delivery is not None and delivery.status_code == 202, delivery
        wait_for(lambda: "ribbit" in self.forge.repo(kind, repo).labels, what="the trigger label")

    def label_an_issue(self) -> None:
        assert ".venv/bin/ribbit jobs" in self.step_text
        for kind, repo in REPOS.items():
            issue = self.forge.create_issue(
                kind, repo, title=ISSUE[0], body=ISSUE[1], author="maya"
            )
            delivery = self.forge.add_label(kind, repo, issue.number, "ribbit", actor="maya")
            assert delivery is not None and delivery.status_code == 202, delivery
        wait_for(self.solves_ended, timeout=STEP_LIMIT_S, what="both solve jobs to end")
        listed = self.sh(".venv/bin/ribbit jobs")
        assert listed.returncode == 0, listed.stderr
        for job in self.solves_ended():
            assert job["state"] == "succeeded", (job, self.serve_log())
            assert re.search(rf"^{job['id'][:12]} +solve +succeeded ", listed.stdout, re.M)

    def solves_ended(self) -> list[dict[str, Any]]:
        done = self.sh(".venv/bin/ribbit jobs --json")
        assert done.returncode == 0, done.stderr
        solves = [j for j in json.loads(done.stdout) if j["kind"] == "solve"]
        ended = len(solves) == len(REPOS) and all(j["finished_at"] for j in solves)
        return solves if ended else []

    # -- following the steps -----------------------------------------------------------

    def follow(self, step: QuickstartStep) -> None:
        self.step_text = step.text
        if not step.blocks:
            assert step.number in FORGE_STEPS, f"no plan for step {step.number}: {step.title}"
            plan: dict[int, Callable[[], None]] = {
                3: lambda: None,
                7: self.gitlab_token,
                9: self.first_label,
                10: self.label_an_issue,
            }
            plan[step.number]()
            return
        assert step.number not in FORGE_STEPS, f"step {step.number} has commands now"
        for block in step.blocks:
            if re.fullmatch(RULES[4].pattern, block[0]):
                self.reverse_proxy(block)
                continue
            for line in block:
                self.run_line(line)

    def run_line(self, line: str) -> None:
        matches = [(r, m) for r in RULES if (m := re.fullmatch(r.pattern, line.strip()))]
        assert len(matches) == 1, f"{len(matches)} rules for quickstart line {line!r}"
        [(rule, match)] = matches
        getattr(self, rule.action)(match)


@pytest.fixture
def quickstart(
    forge_world: Any, tmp_path: Path, tiny_model_dir: Path, sandbox_backend: str
) -> Iterator[Quickstart]:
    forge = forge_world.forge
    for repo in REPOS.values():
        kind = "github" if repo == REPOS["github"] else "gitlab"
        forge.create_repo(kind, repo, files=REPO_FILES)
        forge.add_collaborator(kind, repo, BOT_LOGIN, "write")
        forge.add_collaborator(kind, repo, "maya", "maintain")
    replay = record(GOOD_SCRIPT, tmp_path / "replay.jsonl", tmp_path)
    person = Quickstart(tmp_path, forge, replay, tiny_model_dir)
    try:
        yield person
    finally:
        person.stop()


def test_the_quickstart_ends_in_draft_prs_on_both_forges(quickstart: Quickstart) -> None:
    steps = quickstart_steps((ROOT / "README.md").read_text())
    assert len(steps) == 10
    for step in steps:
        quickstart.follow(step)
    assert quickstart.serve_proc is not None and quickstart.doctor_output
    forge = quickstart.forge
    for kind, repo in REPOS.items():
        [pr] = forge.pulls(kind, repo)
        assert pr.draft or pr.title.startswith("Draft: "), pr
        assert pr.head.startswith("ribbit/issue-")
        assert "Ribbit gates: passed" in pr.body
        [status] = [
            c
            for c in forge.comments(kind, repo, pr_issue(forge, kind, repo))
            if c.author == BOT_LOGIN
        ]
        assert "Draft pull request opened" in status.body, status.body


def pr_issue(forge: LocalForge, kind: str, repo: str) -> int:
    """The labelled issue's number (the issue titled as ISSUE)."""
    [number] = [n for n, i in forge.repo(kind, repo).issues.items() if i.title == ISSUE[0]]
    return int(number)


def test_every_rule_and_plan_is_used_by_the_readme() -> None:
    """A rule or a plan no quickstart line needs any more is a step that changed: said."""
    steps = quickstart_steps((ROOT / "README.md").read_text())
    lines = [line.strip() for s in steps for b in s.blocks for line in b]
    for rule in RULES:
        assert any(re.fullmatch(rule.pattern, line) for line in lines), rule.pattern
    assert {s.number for s in steps if not s.blocks} == set(FORGE_STEPS)


def test_a_changed_quickstart_shape_is_refused() -> None:
    from tests.support import QuickstartShapeError

    readme = (ROOT / "README.md").read_text()
    with pytest.raises(QuickstartShapeError):
        quickstart_steps(readme.replace("## Quickstart:", "## Getting started:"))
    with pytest.raises(QuickstartShapeError):
        quickstart_steps(readme.replace("\n3. **Hardware.**", "\n4. **Hardware.**"))
    unknown = QuickstartStep(2, "Weights.", "", (("curl -O https://example.org/w",),))
    with pytest.raises(AssertionError, match="0 rules for quickstart line"):
        Quickstart.run_line(object.__new__(Quickstart), unknown.blocks[0][0])
