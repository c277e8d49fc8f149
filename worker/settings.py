"""The settings sections only the worker and the trainer read, and ``WorkerSettings``.

``WorkerSettings`` is bot.settings.Settings plus the sandbox, model, agent and gate
sections: same variables (``RIBBIT_SANDBOX__BACKEND``, ...), same sources and defaults.
Every `ribbit` process builds it (bot/cli.py, the composition root, and the worker's and
trainer's own entry points), so the web tier, which types against ``Settings``, never
names these sections, and bot/ never imports worker/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr

from bot.settings import Section, Settings, build_settings

# The public package registries the setup step may reach by default.
DEFAULT_SETUP_HOSTS = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "index.crates.io",
    "static.crates.io",
    "crates.io",
    "repo.maven.apache.org",
    "repo1.maven.org",
)


# The one list of sandbox backends: this setting's and every `--backend` flag's choices
# (worker/sandbox/backend_option.py).
SandboxBackend = Literal["auto", "docker", "bubblewrap"]


class SandboxSettings(Section):
    backend: SandboxBackend = Field(
        default="auto",
        description="Where untrusted code runs. auto: docker if an engine answers and has the "
        "image, else bubblewrap.",
    )
    docker_url: str | None = Field(
        default=None,
        description="Docker Engine API URL (unix:///run/podman/podman.sock for Podman). "
        "Unset: DOCKER_HOST or the default socket.",
    )
    image: str = Field(default="ribbit-sandbox:latest", description="Sandbox image (docker).")
    memory_mb: int = Field(
        default=2048,
        ge=64,
        description="Memory limit per sandbox (docker: cgroup, no swap; bubblewrap: address "
        "space per process).",
    )
    cpus: float = Field(default=1.0, gt=0, description="CPU limit per sandbox (docker only).")
    pids: int = Field(default=256, ge=16, description="Process limit per sandbox.")
    workspace_mb: int = Field(
        default=2048,
        ge=16,
        description="Writable workspace size limit (bubblewrap: needs a root worker; "
        "unprivileged, only a per-file limit of this size applies).",
    )
    setup_network: bool = Field(
        default=True,
        description="Let the repository's setup command reach the package registries in "
        "setup_allowed_hosts, through the worker's proxy (no other network, both backends). "
        "The agent and the tests never have network.",
    )
    setup_allowed_hosts: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SETUP_HOSTS),
        description="Hosts the setup proxy lets through (HTTPS, or HTTP on port 80); "
        "`*.example.org` matches subdomains. They must resolve to public addresses.",
    )
    package_index_url: str | None = Field(
        default=None,
        description="Package mirror passed to the setup step as PIP_INDEX_URL; its host is "
        "allowed too, even on a private address.",
    )
    setup_ca_bundle: Path | None = Field(
        default=None,
        description="A complete PEM CA bundle the setup step trusts instead of the image's "
        "(for a TLS-inspecting gateway in front of the registries).",
    )
    setup_timeout_s: int = Field(
        default=900, ge=10, description="Time limit of the repository's setup command."
    )
    detect_setup: bool = Field(
        default=True,
        description="When `.ribbit.yml` names no `setup`, install what the repository declares "
        "(pip with the test extra, group or tox/hatch/pdm/nox environment, npm/pnpm/yarn, "
        'go mod, cargo fetch; worker/sandbox/setupcmd.py). `setup: ""` in '
        "`.ribbit.yml` turns it off for one repository.",
    )
    repo_setup_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts a repository's `.ribbit.yml` `setup_hosts` may add to the setup "
        "proxy's allow-list (`*.example.org` matches subdomains). Empty: repositories add none.",
    )
    setup_credentials_dir: Path | None = Field(
        default=None,
        description="Private registry credentials for the setup command only: a folder with any "
        "of `netrc`, `pip.conf`, `npmrc`. Shown to the setup step alone, never to the agent "
        "or the tests.",
    )
    repo_images: list[str] = Field(
        default_factory=list,
        description="Images a repository may name (`.ribbit.yml` `image`, devcontainer.json "
        "`image` or a Dockerfile's `FROM`); an entry ending in `*` is a prefix. Always "
        "allowed: the sandbox image. Docker backend only.",
    )
    repo_image_builds: bool = Field(
        default=True,
        description="Build a repository's `.devcontainer` Dockerfile on the docker backend: "
        "FROM an allowed image only, its steps run with no network.",
    )
    env_cache_dir: Path | None = Field(
        default=None,
        description="Where set-up environments are cached per repository (keyed by its lock "
        "and manifest files, setup command and sandbox image). Unset: DATA_DIR/envs.",
    )
    env_cache_max_mb: int = Field(
        default=10240,
        ge=0,
        description="Size of the environment cache; least recently used entries go first "
        "(0: no cache, every job installs).",
    )
    env_cache_max_age_days: float = Field(
        default=14.0, gt=0, description="Cached environments unused for this long are removed."
    )


class ModelSettings(Section):
    policy: Literal["transformers", "openai", "replay"] = Field(
        default="transformers", description="Model backend for the agent."
    )
    model: str = Field(
        default="microsoft/FrogNano-4B-2609",
        description="Model id or local path (transformers) or served model name (openai).",
    )
    revision: str | None = Field(default=None, description="Model revision (transformers).")
    openai_base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp, Ollama).",
    )
    openai_api_key: SecretStr | None = Field(default=None, description="API key for that server.")
    openai_server: Literal["vllm", "sglang", "other"] = Field(
        default="vllm",
        description="What serves RIBBIT_MODEL__OPENAI_BASE_URL: decides how promoted LoRA "
        "versions are loaded there and named in requests (other: no adapters).",
    )
    adapter_servers: list[str] = Field(
        default_factory=list,
        description="Base URLs (.../v1) of every inference server replica that must load a "
        "promoted version (`ribbit model promote`). Empty: RIBBIT_MODEL__OPENAI_BASE_URL.",
    )
    quantization: Literal["none", "4bit", "8bit"] = Field(
        default="none", description="bitsandbytes quantisation where installed."
    )
    fast_decode: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="In-process decoding with a static KV cache and a compiled decode step "
        "(transformers' fast generation; worker/agent/policy/fast_decode.py). auto: on with "
        "CUDA, off on CPU; on: also on CPU (static cache only, no compile). A model that "
        "cannot falls back to plain decoding with the reason logged.",
    )
    adapter_path: Path | None = Field(
        default=None,
        description="LoRA adapter on top of the model (in process, or loaded on the server "
        "for openai). Workers set it from the promoted model version (`ribbit model "
        "promote`); rarely set by hand.",
    )
    replay_file: Path | None = Field(default=None, description="Trajectory to replay (replay).")
    weights_dir: Path | None = Field(
        default=None,
        description="Where `ribbit model pull` puts base weights and workers look for them "
        "(the models volume). Unset: DATA_DIR/models.",
    )
    openai_timeout_s: float = Field(
        default=600.0, gt=0, description="Read timeout of one chat-completions request (openai)."
    )
    openai_max_retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Retries of a failed request (connection refused, timeout, 429, 5xx).",
    )
    openai_retry_backoff_s: float = Field(
        default=2.0, ge=0, description="First retry delay; doubles on each further retry."
    )


class AgentSettings(Section):
    # Budgets: Leaf's SWE-bench Verified preset (microsoft/FrogNano
    # frognano/configs/eval/swebench-verified.yaml @ 6dc21748: max_steps 100,
    # max_context_tokens 65536, max_total_time_sec 3000), the one eval preset of the
    # SWE-bench kind whose values config.py (@ 354fccee) also uses as defaults; see
    # worker/agent/README.md for why not the 150 / 131,072 / 10,800 s of the README.
    # Sampling: the same preset's temperature 0.6, top_p 0.95, top_k 20, min_p 0,
    # repetition_penalty 1.0 and enable_thinking true.
    max_turns: int = Field(default=100, ge=1, description="Model turns per run (Leaf max_steps).")
    max_context_tokens: int = Field(
        default=65_536,
        ge=1024,
        le=131_072,
        description="Context window cap (Leaf max_context_tokens; the model allows 131,072).",
    )
    max_new_tokens: int = Field(
        default=8_192, ge=16, description="New tokens per model turn (Leaf max_tokens_per_turn)."
    )
    max_minutes: float = Field(
        default=50.0, gt=0, description="Wall-clock budget per run (Leaf max_total_time_sec 3000)."
    )
    temperature: float = Field(default=0.6, ge=0, description="Sampling temperature (0: greedy).")
    top_p: float = Field(default=0.95, gt=0, le=1, description="Nucleus sampling mass.")
    top_k: int = Field(default=20, ge=0, description="Top-k sampling (0: off).")
    min_p: float = Field(default=0.0, ge=0, le=1, description="Min-p sampling (0: off).")
    repetition_penalty: float = Field(default=1.0, gt=0, description="1.0: no penalty.")
    enable_thinking: bool = Field(default=True, description="Qwen3.5 thinking mode.")
    # Ribbit's departures from Leaf, all off: see worker/agent/README.md, "Options".
    keep_output_tail: bool = Field(
        default=False, description="Long tool output keeps head and tail (Leaf: head only)."
    )
    read_footer: bool = Field(
        default=False, description="Read says how to read on when limit cut the file."
    )
    clear_errors: bool = Field(
        default=False, description="Common tool errors add a line on what to do next."
    )
    recover_malformed_calls: bool = Field(
        default=False,
        description="An unparseable tool call gets an error observation (Leaf: runs it with {}).",
    )


class GateSettings(Section):
    test_timeout_s: int = Field(default=900, ge=10, description="Test command timeout per run.")
    max_diff_lines: int = Field(default=1500, ge=1, description="Largest patch the bot may open.")
    extra_semgrep_rules: list[Path] = Field(
        default_factory=list, description="Semgrep rule files added for every repository."
    )
    semgrep_timeout_s: int = Field(
        default=300, ge=10, description="Timeout of one Semgrep scan (before or after the patch)."
    )
    semgrep_bin: Path | None = Field(
        default=None,
        description="The semgrep executable: a path, or a name looked up on PATH. Unset: the "
        "isolated install beside the app's venv (`<venv>-semgrep/bin/semgrep`, which `make "
        "install` and the image build from deploy/semgrep.lock) if present, else `semgrep` "
        "on PATH.",
    )
    total_timeout_s: int = Field(
        default=3600,
        ge=30,
        description="Budget of the whole gate run; every gate's own timeouts shrink to fit it.",
    )


# Past the agent's deadline a running tool call may take this long (worker/agent/tools.py
# RUNNER_GRACE_S, Leaf's host-side grace), plus the final diff.
AGENT_GRACE_S = 120
# Clone, push, forge calls and status comments around the stages.
JOB_MARGIN_S = 600


def job_budget_s(agent: AgentSettings, gates: GateSettings, sandbox: SandboxSettings) -> int:
    """Seconds one solve job may need at most; see WorkerSettings.effective_job_time_limit_s."""
    setup_s = sandbox.setup_timeout_s
    agent_s = agent.max_minutes * 60 + AGENT_GRACE_S
    # Before and after, each with a rerun and a run with the base's test configuration;
    # Semgrep on both trees. The whole gate run is also capped by its own budget.
    gates_s = min(gates.total_timeout_s, 2 * 3 * gates.test_timeout_s + 2 * gates.semgrep_timeout_s)
    return int(setup_s + agent_s + gates_s + JOB_MARGIN_S)


class WorkerSettings(Settings):
    """Settings with the sections of the worker's parts (and the trainer's, which runs
    the same agent, sandboxes and gates)."""

    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    gates: GateSettings = Field(default_factory=GateSettings)

    @property
    def effective_job_time_limit_s(self) -> int:
        """The longest a solve job may take when every stage uses all of its budget: the
        setup command, the agent's wall clock plus one tool call's grace past it, the
        gates (before and after trees: setup, tests and a rerun each; Semgrep twice), and
        a margin for clone, push and forge calls. The broker's visibility timeout and
        the Celery limits follow from it (bot/queue.py, worker/celery_app.py)."""
        if self.job_time_limit_s is not None:
            return self.job_time_limit_s
        return job_budget_s(self.agent, self.gates, self.sandbox)

    @property
    def configured_model(self) -> str:
        return self.model.model

    @property
    def effective_weights_dir(self) -> Path:
        return self.model.weights_dir or self.data_dir / "models"


def load_worker_settings(**overrides: Any) -> WorkerSettings:
    """Build WorkerSettings from the environment (bot.settings.load_settings's sources),
    turning pydantic's errors into one readable SettingsError."""
    return build_settings(WorkerSettings, **overrides)


def as_worker_settings(settings: Settings) -> WorkerSettings:
    """The worker's view of settings that reached it through bot/ (a doctor check, the
    CLI group's ``ctx.obj``, the web app's seams), typed as ``Settings``: the same object
    when the process built WorkerSettings, as every `ribbit` process does; otherwise the
    same values with the worker's sections read from the environment."""
    if isinstance(settings, WorkerSettings):
        return settings
    given = {name: getattr(settings, name) for name in type(settings).model_fields}
    return load_worker_settings(**given)
