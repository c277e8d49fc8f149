"""``ribbit envs``, ``ribbit train``, ``ribbit model`` and ``ribbit eval``.

The bot's top-level group (bot/cli.py) loads these lazily and passes its
Settings as ``ctx.obj``; commands that need none of it work without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot.console import empty, progress
from bot.settings import Settings
from trainer.envs.schema import Environment

if TYPE_CHECKING:
    from trainer.distributed import Ranks


def _settings(ctx: click.Context) -> Settings:
    settings = ctx.find_root().obj
    if not isinstance(settings, Settings):
        from bot.settings import SettingsError, load_settings

        try:
            settings = load_settings()
        except SettingsError as exc:
            raise click.ClickException(str(exc)) from None
    return settings


def _store_dir(ctx: click.Context, store: Path | None) -> Path:
    return store if store is not None else _settings(ctx).data_dir / "trainer"


def _summary(env: Environment) -> str:
    c = env.calibration
    calib = f"pass {c.solved}/{c.k}" if c.k else "uncalibrated"
    return (
        f"{env.instance_id}\t{env.split}\tF2P={len(env.FAIL_TO_PASS)} "
        f"P2P={len(env.PASS_TO_PASS)}\t{calib}"
    )


def _index(ctx: click.Context, env_store: Any) -> None:
    """Keep the store's table in the database in step with the files."""
    from trainer.envs.index import sync_index

    sync_index(_db(ctx), env_store)


_envs_option = click.option(
    "--envs",
    "selector",
    default="all",
    show_default=True,
    help="all, split:<name>, signal, or ids a,b,c.",
)
F = TypeVar("F", bound=Callable[..., Any])


def _test_run_options(command: F) -> F:
    """How an environment's tests are run while it is validated (envs build, from-outcomes)."""
    command = click.option(
        "--timeout",
        "timeout_s",
        type=float,
        default=300.0,
        show_default=True,
        help="Seconds one test run may take.",
    )(command)
    return click.option(
        "--reruns",
        type=int,
        default=3,
        show_default=True,
        help="Runs of the tests per tree, to tell flaky tests from real ones.",
    )(command)


_store_option = click.option(
    "--store",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Environment store (default: DATA_DIR/trainer).",
)


@contextlib.contextmanager
def _checked_out(
    env_store: Any, chosen: list[Environment], purpose: str
) -> Iterator[list[tuple[Environment, Path]]]:
    """Each environment checked out of the store at its base commit, removed after."""
    root = Path(tempfile.mkdtemp(prefix=f"ribbit-{purpose}-"))
    try:
        yield [(e, env_store.checkout(e, root / e.instance_id)) for e in chosen]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- envs ---------------------------------------------------------------------------------------
@click.group()
def envs() -> None:
    """Training environments built from merged fixes (SWE-bench compatible)."""


@envs.command("build")
@click.option(
    "--repo",
    "repo_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Local git repository.",
)
@click.option("--base", required=True, help="Base commit sha (the PR's base).")
@click.option("--fix", required=True, help="Fix commit sha (the merged fix).")
@click.option(
    "--issue-file",
    required=True,
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Issue text (title on the first line).",
)
@click.option(
    "--name",
    "repo_name",
    default="local/repo",
    show_default=True,
    help="owner/name, for the instance id.",
)
@click.option(
    "--test-command",
    default=None,
    help="Command that runs the repository's tests in the sandbox (default: test in the "
    ".ribbit.yml committed at --base).",
)
@click.option(
    "--setup",
    "setup_commands",
    multiple=True,
    help="Setup command, run by the production setup step before the tests; repeat for "
    "several (default: setup in the .ribbit.yml committed at --base).",
)
@_test_run_options
@click.option("--json", "as_json", is_flag=True, help="Print the environment as JSON.")
@_store_option
@click.pass_context
def build_env(
    ctx: click.Context,
    repo_dir: Path,
    base: str,
    fix: str,
    issue_file: Path,
    repo_name: str,
    test_command: str | None,
    setup_commands: tuple[str, ...],
    reruns: int,
    timeout_s: float,
    as_json: bool,
    store: Path | None,
) -> None:
    """Build one environment from a fix; rejected candidates are kept with their reason.
    The setup and test commands and the image come from the repository's .ribbit.yml at
    the base commit, as a solve job on that commit would have read them, unless given."""
    from bot.repo_config import RepoConfigError, read_repo_config
    from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
    from trainer.envs.storage import EnvironmentStore
    from worker.agent.episode import SandboxRecipe

    try:
        config = read_repo_config(repo_dir, base)
    except RepoConfigError as exc:
        raise click.ClickException(str(exc)) from None
    settings = _settings(ctx)
    env_store = EnvironmentStore(_store_dir(ctx, store))
    builder = EnvironmentBuilder(
        SandboxRecipe.production(settings.sandbox), reruns=reruns, test_timeout_s=timeout_s
    )
    spec = BuildSpec(
        repo_dir,
        base,
        fix,
        issue_file.read_text(encoding="utf-8"),
        repo=repo_name,
        test_command=test_command or config.test,
        setup_commands=setup_commands or ((config.setup,) if config.setup else ()),
        image=config.image,
    )
    try:
        with progress(f"building {repo_name} at {fix[:12]} (tests run {reruns}x per tree)"):
            env = builder.build(spec)
        env_store.add(env, repo_dir)
    except BuildRejected as exc:
        env_store.reject(exc.rejection)
        raise click.ClickException(f"rejected: {exc}") from None
    _index(ctx, env_store)
    click.echo(env.model_dump_json(indent=2) if as_json else _summary(env))


@envs.command("list")
@_store_option
@click.option("--rejected", is_flag=True, help="List rejected candidates instead.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of lines.")
@click.pass_context
def list_envs(ctx: click.Context, store: Path | None, rejected: bool, as_json: bool) -> None:
    """List environments (or rejections, with their reasons)."""
    from trainer.envs.storage import EnvironmentStore

    env_store = EnvironmentStore(_store_dir(ctx, store))
    if rejected:
        rejections = list(env_store.rejections())
        if as_json:
            click.echo(json.dumps([r.model_dump(mode="json") for r in rejections], indent=2))
        elif not rejections:
            empty(f"no rejected candidates in {env_store.root}")
        for r in [] if as_json else rejections:
            click.echo(f"{r.candidate}\t{r.reason}\t{r.detail}")
        return
    found = list(env_store)
    if as_json:
        click.echo(json.dumps([e.model_dump(mode="json") for e in found], indent=2))
    elif not found:
        empty(
            f"no environments in {env_store.root}; build them with `ribbit envs build` or "
            "`ribbit envs from-outcomes`"
        )
    for env in [] if as_json else found:
        click.echo(_summary(env))


@envs.command("show")
@click.argument("instance_id")
@_store_option
@click.pass_context
def show_env(ctx: click.Context, instance_id: str, store: Path | None) -> None:
    """Print one environment as JSON."""
    from trainer.envs.storage import EnvironmentStore

    try:
        env = EnvironmentStore(_store_dir(ctx, store)).get(instance_id)
    except (KeyError, ValueError):
        raise click.ClickException(f"no environment {instance_id!r}") from None
    click.echo(env.model_dump_json(indent=2))


@envs.command("grade")
@click.argument("instance_id")
@click.option(
    "--patch",
    "patch_file",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The candidate patch (a git diff against the environment's base commit).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@_store_option
@click.pass_context
def grade_env(
    ctx: click.Context, instance_id: str, patch_file: Path, as_json: bool, store: Path | None
) -> None:
    """Grade one patch on one environment, as training does, in a fresh sandbox: the
    SWE-bench verdict (tests only) and Ribbit's reward (tests and gates)."""
    from trainer.envs.storage import EnvironmentStore
    from trainer.rl.reward import compute_reward
    from worker.agent.episode import SandboxRecipe

    settings = _settings(ctx)
    env_store = EnvironmentStore(_store_dir(ctx, store))
    try:
        env = env_store.get(instance_id)
    except (KeyError, ValueError):
        raise click.ClickException(f"no environment {instance_id!r}") from None
    patch = patch_file.read_text(encoding="utf-8", errors="replace")
    with tempfile.TemporaryDirectory(prefix="ribbit-grade-") as tmp:
        checkout = env_store.checkout(env, Path(tmp) / "repo")
        result = compute_reward(
            env,
            patch,
            checkout,
            SandboxRecipe.production(settings.sandbox),
            gate_settings=settings.gates,
        )
    if as_json:
        click.echo(json.dumps({"instance_id": env.instance_id, **result.to_json()}, indent=2))
        return
    click.echo(f"{env.instance_id}: resolved={result.resolved} reward={result.reward}")
    click.echo(f"  {result.reason}")
    for test_id in result.failed_tests:
        click.echo(f"  not passed: {test_id}")
    for f in result.findings:
        click.echo(f"  {f.gate}/{f.rule}: {f.message}")


@envs.command("export")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@_envs_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["ribbit", "swebench", "skyrl", "verl"]),
    default="ribbit",
    show_default=True,
    help="Record shape (see trainer/README.md, Larger runs).",
)
@_store_option
@click.pass_context
def export_envs(
    ctx: click.Context, path: Path, selector: str, fmt: str, store: Path | None
) -> None:
    """Write environments as JSON lines: Ribbit's records (every field; SWE-bench's
    fields first), SWE-bench instances only, or SkyRL / verl dataset rows."""
    from trainer.envs.storage import EnvironmentStore

    env_store = EnvironmentStore(_store_dir(ctx, store))
    n = env_store.export_jsonl(path, env_store.select(selector), fmt)
    click.echo(f"exported {n} environment(s) to {path} ({fmt})")
    if fmt in ("skyrl", "verl"):
        click.echo("their images: ribbit envs image (one per environment, repo in /testbed)")


@envs.command("image")
@_envs_option
@click.option(
    "--base-image",
    default=None,
    help="Image to build on (default: the sandbox image, RIBBIT_SANDBOX__IMAGE).",
)
@_store_option
@click.pass_context
def image_envs(
    ctx: click.Context, selector: str, base_image: str | None, store: Path | None
) -> None:
    """Build one container image per environment with its repository at the base commit
    in /testbed: what SkyRL's SWE example (and the exported eval_script) run in."""
    from trainer.envs.export import build_testbed_image
    from trainer.envs.storage import EnvironmentStore
    from worker.sandbox.base import SandboxError
    from worker.sandbox.docker import docker_client

    settings = _settings(ctx)
    env_store = EnvironmentStore(_store_dir(ctx, store))
    chosen = env_store.select(selector)
    if not chosen:
        raise click.ClickException(f"no environments match {selector!r}")
    try:
        client = docker_client(settings.sandbox, timeout=600)
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from None
    import docker

    for env in chosen:
        try:
            tag = build_testbed_image(
                env, env_store, client, base_image=base_image or settings.sandbox.image
            )
        except (docker.errors.BuildError, docker.errors.APIError, FileNotFoundError) as exc:
            raise click.ClickException(f"{env.instance_id}: {exc}") from None
        click.echo(f"{env.instance_id}\t{tag}")


@envs.command("import")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_store_option
@click.pass_context
def import_envs(ctx: click.Context, path: Path, store: Path | None) -> None:
    """Read SWE-bench (or Ribbit) JSONL; duplicates are refused and listed."""
    from trainer.envs.storage import EnvironmentStore

    env_store = EnvironmentStore(_store_dir(ctx, store))
    imported, refused = env_store.import_jsonl(path)
    _index(ctx, env_store)
    click.echo(f"imported {len(imported)}, refused {len(refused)}")
    for r in refused:
        click.echo(f"  {r.candidate}: {r.reason} ({r.detail})")


@envs.command("from-outcomes")
@click.option(
    "--forge",
    "forge_name",
    required=True,
    help="The forge the outcomes were recorded on (github, gitlab), as the outcome store has it.",
)
@click.option("--name", "repo_name", required=True, help="owner/name as the outcome store has it.")
@click.option(
    "--repo",
    "repo_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local clone holding the PRs' base commits.",
)
@click.option(
    "--test-command",
    default=None,
    help="Overrides the test command each job recorded from .ribbit.yml.",
)
@_test_run_options
@_store_option
@click.pass_context
def envs_from_outcomes(
    ctx: click.Context,
    forge_name: str,
    repo_name: str,
    repo_dir: Path,
    test_command: str | None,
    reruns: int,
    timeout_s: float,
    store: Path | None,
) -> None:
    """Build environments from recorded PR outcomes (merged: built; closed: kept as
    negative examples with review comments)."""
    from bot.store.db import Database
    from trainer.envs.builder import EnvironmentBuilder
    from trainer.envs.index import sync_index
    from trainer.envs.outcomes import environments_from_outcomes
    from trainer.envs.storage import EnvironmentStore
    from worker.agent.episode import SandboxRecipe

    settings = _settings(ctx)
    builder = EnvironmentBuilder(
        SandboxRecipe.production(settings.sandbox), reruns=reruns, test_timeout_s=timeout_s
    )
    db = Database(settings.effective_database_url)
    db.migrate()
    env_store = EnvironmentStore(_store_dir(ctx, store))
    with progress(f"building environments from {forge_name}:{repo_name}'s outcomes"):
        report = environments_from_outcomes(
            db, forge_name, repo_name, repo_dir, builder, env_store, test_command=test_command
        )
    sync_index(db, env_store)
    if not report.built and not report.rejected:
        empty(f"no recorded outcomes for {forge_name}:{repo_name}; see `ribbit outcomes`")
    for env in report.built:
        click.echo(f"built {_summary(env)}")
    for r in report.rejected:
        click.echo(f"rejected {r.candidate}: {r.reason} ({r.detail})")


@envs.command("calibrate")
@_envs_option
@click.option("--k", type=int, default=4, show_default=True, help="Rollouts per environment.")
@click.option(
    "--model",
    "model_path",
    default=None,
    help="Model to calibrate with (default: the promoted version, else the base).",
)
@click.option("--max-turns", type=int, default=100, show_default=True, help="Agent turns.")
@click.option(
    "--max-new-tokens", type=int, default=8192, show_default=True, help="New tokens per model turn."
)
@_store_option
@click.pass_context
def calibrate_envs(
    ctx: click.Context,
    selector: str,
    k: int,
    model_path: str | None,
    max_turns: int,
    max_new_tokens: int,
    store: Path | None,
) -> None:
    """k rollouts per environment; pass@k stored, always/never solved marked (no signal)."""
    from bot.settings import AgentSettings
    from bot.store.db import Database
    from trainer.calibrate import calibrate
    from trainer.envs.storage import EnvironmentStore
    from trainer.evaluate import version_policy
    from trainer.registry import promoted_model
    from trainer.rl.rollout import graded_reward
    from worker.agent.episode import SandboxRecipe

    settings = _settings(ctx)
    env_store = EnvironmentStore(_store_dir(ctx, store))
    chosen = env_store.select(selector)
    if not chosen:
        raise click.ClickException(f"no environments match {selector!r}")
    base, adapter = model_path or settings.model.model, None
    if model_path is None:
        db = Database(settings.effective_database_url)
        db.migrate()
        current = promoted_model(db)
        if current is not None:
            base, adapter = current.base_model, current.adapter_path
    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    factory = SandboxRecipe.production(settings.sandbox)
    policy = version_policy(base, adapter, limits)
    with (
        _checked_out(env_store, chosen, "calibrate") as pairs,
        progress(f"calibrating ({k} rollouts each)", total=len(chosen)) as steps,
    ):
        report = calibrate(
            pairs,
            policy,
            limits,
            factory,
            graded_reward(factory),
            k=k,
            on_env=lambda env: steps.advance(f"calibrated {env.instance_id}"),
        )
    for env in chosen:
        calibration = report.calibrations[env.instance_id]
        env_store.update(env.model_copy(update={"calibration": calibration}))
        signal = "signal" if calibration.has_signal else "no signal"
        click.echo(f"{env.instance_id}\tpass {calibration.solved}/{calibration.k}\t{signal}")
    _index(ctx, env_store)


# -- train --------------------------------------------------------------------------------------
@click.command("train")
@_envs_option
@click.option("--steps", type=int, default=100, show_default=True, help="Optimiser steps.")
@click.option(
    "--group-size",
    type=int,
    default=8,
    show_default=True,
    help="Rollouts per environment per step; advantages are normalised within a group.",
)
@click.option(
    "--model", "model_path", default=None, help="Base model (default: RIBBIT_MODEL__MODEL)."
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where checkpoints and metrics go (default: a new run folder in the store).",
)
@click.option(
    "--learning-rate", type=float, default=1e-5, show_default=True, help="Optimiser step size."
)
@click.option(
    "--finetune",
    type=click.Choice(["lora", "full"]),
    default="lora",
    show_default=True,
    help="Train a LoRA adapter (promotable without a restart) or every weight.",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="A checkpoint folder (step-N) to continue from.",
)
@click.option("--max-turns", type=int, default=100, show_default=True, help="Agent turns.")
@click.option(
    "--max-new-tokens", type=int, default=8192, show_default=True, help="New tokens per model turn."
)
@click.option(
    "--register",
    "version_name",
    default=None,
    help="Register the final adapter as a candidate model version.",
)
@click.option(
    "--rollouts",
    "rollout_mode",
    type=click.Choice(["local", "celery", "server"]),
    default="local",
    show_default=True,
    help="local: in this process; celery: ribbit.rollout tasks to workers started with "
    "`ribbit worker --rollouts` (store and run folder on shared storage); server: through "
    "the vLLM/SGLang server of RIBBIT_MODEL__OPENAI_BASE_URL, the step's adapter loaded "
    "there (trainer/README.md, 'Server rollouts').",
)
@click.option(
    "--in-flight",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="--rollouts server: episodes running at once (the server batches them).",
)
@click.option(
    "--line",
    default="default",
    show_default=True,
    help="Model line to train (RIBBIT_TRAINING__LINES): only its repositories' environments "
    "are used, and --register puts the version in this line.",
)
@click.option(
    "--heldout",
    "heldout_selector",
    default=None,
    help="With --register: score the new version on these environments (e.g. "
    "split:heldout) after the run, beside the line's promoted version (or the base), "
    "and record it with the version.",
)
@click.option(
    "--heldout-k",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="--heldout: rollouts per environment.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run's summary as JSON.")
@_store_option
@click.pass_context
def train(
    ctx: click.Context,
    selector: str,
    steps: int,
    group_size: int,
    model_path: str | None,
    output_dir: Path | None,
    learning_rate: float,
    finetune: str,
    resume: Path | None,
    max_turns: int,
    max_new_tokens: int,
    version_name: str | None,
    rollout_mode: str,
    in_flight: int,
    line: str,
    heldout_selector: str | None,
    heldout_k: int,
    as_json: bool,
    store: Path | None,
) -> None:
    """GRPO on stored environments, with the worker's agent loop and the real reward.

    Data parallel on one machine: ``torchrun --nproc-per-node N -m bot train ...``
    (rank 0 alone writes the database, checkpoints and progress)."""
    from trainer.distributed import process_group

    with process_group() as ranks:
        _train(
            ctx,
            ranks,
            selector=selector,
            steps=steps,
            group_size=group_size,
            model_path=model_path,
            output_dir=output_dir,
            learning_rate=learning_rate,
            finetune=finetune,
            resume=resume,
            max_turns=max_turns,
            max_new_tokens=max_new_tokens,
            version_name=version_name,
            rollout_mode=rollout_mode,
            in_flight=in_flight,
            line=line,
            store=store,
            as_json=as_json,
            heldout_selector=heldout_selector,
            heldout_k=heldout_k,
        )


def _train(
    ctx: click.Context,
    ranks: Ranks,
    *,
    selector: str,
    steps: int,
    group_size: int,
    model_path: str | None,
    output_dir: Path | None,
    learning_rate: float,
    finetune: str,
    resume: Path | None,
    max_turns: int,
    max_new_tokens: int,
    version_name: str | None,
    rollout_mode: str,
    store: Path | None,
    line: str = "default",
    as_json: bool = False,
    in_flight: int = 16,
    heldout_selector: str | None = None,
    heldout_k: int = 1,
) -> None:
    import torch

    from bot.model_lines import known_lines
    from bot.store.db import Database
    from trainer.config import TrainSettings
    from trainer.envs.storage import EnvironmentStore
    from trainer.registry import register
    from trainer.rl.learner import Learner, load_base_model
    from trainer.rl.rollout import graded_reward
    from trainer.rl.served import ServerRollouts
    from trainer.rl.sources import RolloutSource
    from trainer.store import TrainingRun
    from trainer.train import StepRecord, seed_everything
    from trainer.train import train as run_training
    from worker.agent.episode import SandboxRecipe
    from worker.weights import base_digest

    settings = _settings(ctx)
    root = _store_dir(ctx, store)
    # Every rank uses the folder rank 0 names (a default named by the clock could differ).
    out = Path(
        ranks.broadcast_object(
            str(output_dir or root / "runs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
        )
    )
    try:
        cfg = TrainSettings(
            model=model_path or _pulled_base(settings),
            store_dir=str(root),
            output_dir=str(out),
            envs=selector,
            steps=steps,
            group_size=group_size,
            learning_rate=learning_rate,
            finetune="full" if finetune == "full" else "lora",
            max_turns=max_turns,
            max_new_tokens=max_new_tokens,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    env_store = EnvironmentStore(root)
    selected = env_store.select(selector)
    if heldout_selector is not None and not version_name:
        raise click.ClickException("--heldout scores the registered version: give --register")
    heldout_envs = env_store.select(heldout_selector) if heldout_selector else []
    if heldout_selector is not None and not heldout_envs:
        raise click.ClickException(f"no environments match --heldout {heldout_selector!r}")
    if line not in known_lines(settings.training):
        raise click.ClickException(
            f"no model line {line!r}; lines: {', '.join(known_lines(settings.training))}"
        )
    # Rank 0 reads the database (migrating it first); every rank trains on its choice.
    ids = ranks.broadcast_object(
        [e.instance_id for e in _line_chosen(settings, line, selected)] if ranks.is_main else []
    )
    chosen = [e for e in selected if e.instance_id in set(ids)]
    if not chosen:
        raise click.ClickException(f"no environments of line {line!r} match {selector!r}")
    factory = SandboxRecipe.production(settings.sandbox)
    # Rank 0 alone touches the database (one run row; concurrent migrations would race).
    db = Database(settings.effective_database_url) if ranks.is_main else None
    run_id = None
    if db is not None:
        db.migrate()
        with db.session() as s:
            run_row = TrainingRun(
                base_model=cfg.model, output_dir=str(out), settings=dataclasses.asdict(cfg)
            )
            s.add(run_row)
            s.flush()
            run_id = run_row.id
    checkouts = Path(tempfile.mkdtemp(prefix="ribbit-train-"))
    try:
        pairs = [(e, env_store.checkout(e, checkouts / e.instance_id)) for e in chosen]
        seed_everything(cfg.seed)
        # A sharded full fine-tune keeps fp32 master weights (1/N of them per rank) and
        # computes in bf16 through FSDP's mixed-precision policy; otherwise the default.
        sharded_full = cfg.finetune == "full" and ranks.distributed
        model, tokenizer = load_base_model(cfg.model, dtype=torch.float32 if sharded_full else None)
        learner = Learner(model, tokenizer, cfg, ranks=ranks)
        if resume is not None:
            learner.load(resume)
        progress: Any = (
            click.progressbar(length=cfg.steps - learner.step_count, label="training")
            if ranks.is_main
            else contextlib.nullcontext()
        )
        with progress as bar:
            curve: list[float] = []

            def on_step(record: StepRecord) -> None:  # rank 0 only (train() calls it there)
                bar.update(1)
                bar.label = (
                    f"step {record.step + 1} reward {record.mean_reward:.2f} "
                    f"pass {record.pass_rate:.0%}"
                    + (f" failed groups {record.failed_groups}" if record.failed_groups else "")
                )
                curve.append(record.mean_reward)
                assert db is not None
                with db.session() as s:
                    row = s.get(TrainingRun, run_id)
                    if row is not None:
                        row.reward_curve = list(curve)
                        row.steps_done = record.step + 1

            source: RolloutSource | None = None
            if rollout_mode == "celery":
                from trainer.celery_app import create_rollout_celery
                from trainer.rl.remote import CeleryRollouts
                from trainer.train import agent_limits

                source = CeleryRollouts(
                    create_rollout_celery(settings),
                    store_dir=root,
                    output_dir=out,
                    limits=agent_limits(cfg),
                    seed=cfg.seed + ranks.rank,
                )
            elif rollout_mode == "server":
                from trainer.train import agent_limits

                source = ServerRollouts(
                    settings.model,
                    agent_limits(cfg),
                    factory,
                    graded_reward(factory),
                    output_dir=out,
                    in_flight=in_flight,
                )
            try:
                summary = run_training(
                    learner,
                    pairs,
                    factory,
                    graded_reward(factory),
                    cfg,
                    on_step=on_step,
                    rollouts=source,
                )
            finally:
                if isinstance(source, ServerRollouts):
                    source.close()  # the run's last adapter off the servers
    except Exception:
        if db is not None:
            with db.session() as s:
                row = s.get(TrainingRun, run_id)
                if row is not None:
                    row.state = "failed"
        raise
    finally:
        shutil.rmtree(checkouts, ignore_errors=True)
    if db is None:
        return
    rewards = summary.mean_rewards
    with db.session() as s:
        row = s.get(TrainingRun, run_id)
        assert row is not None
        row.state, row.steps_done = "finished", learner.step_count
        row.first_mean_reward = rewards[0] if rewards else None
        row.last_mean_reward = rewards[-1] if rewards else None
        row.reward_curve = list(rewards)
        row.finished_at = datetime.now(UTC)
    last = summary.checkpoints[-1] if summary.checkpoints else None
    world = f" on {ranks.world_size} ranks" if ranks.distributed else ""
    if not as_json:
        click.echo(
            f"run {run_id}: {len(rewards)} steps{world}, mean reward "
            f"{rewards[0] if rewards else 0:.3f} -> {rewards[-1] if rewards else 0:.3f}; "
            f"checkpoint {last}"
        )
        click.echo(_run_figures(summary.steps, out))
    registered = None
    if version_name and last is not None:
        # A LoRA run exports an adapter over the base; a full fine-tune, a whole model.
        adapter, full = last / "adapter", last / "model"
        base = str(full) if full.is_dir() else cfg.model
        register(
            db,
            version_name,
            base_model=base,
            adapter_path=str(adapter) if adapter.is_dir() else None,
            run_id=run_id,
            base_digest=base_digest(base, settings.effective_weights_dir),
            line=line,
        )
        registered = version_name
        if not as_json:
            click.echo(f"registered {version_name} (candidate; evaluate and promote it)")
    heldout = None
    if registered and heldout_envs:
        heldout = _heldout_before_after(
            ctx,
            db,
            env_store,
            heldout_envs,
            registered,
            cfg.model,
            factory,
            k=heldout_k,
            max_turns=max_turns,
            max_new_tokens=max_new_tokens,
            as_json=as_json,
        )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "run_id": run_id,
                    "steps": len(rewards),
                    "world_size": ranks.world_size,
                    "mean_rewards": list(rewards),
                    "checkpoint": None if last is None else str(last),
                    "metrics": str(out / "metrics.jsonl"),
                    "registered": registered,
                    "heldout": heldout,
                },
                indent=2,
            )
        )


def _heldout_before_after(
    ctx: click.Context,
    db: Any,
    env_store: Any,
    envs: list[Environment],
    candidate: str,
    start_model: str,
    factory: Any,
    *,
    k: int,
    max_turns: int,
    max_new_tokens: int,
    as_json: bool,
) -> dict[str, Any]:
    """The run's new version scored on held-out environments beside what it would
    replace, in `ribbit model evaluate`'s grading; printed side by side."""
    from bot.settings import AgentSettings
    from trainer.evaluate import before_and_after

    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    with (
        _checked_out(env_store, envs, "heldout") as pairs,
        progress(f"held-out evaluation ({k} rollouts each)") as steps,
    ):
        before, after = before_and_after(
            db,
            candidate,
            start_model,
            pairs,
            factory,
            limits,
            k=k,
            on_env=lambda env: steps.advance(f"scored {env.instance_id}"),
        )
    if not as_json:
        click.echo(f"held-out pass@1 on {after.score.envs} env(s), {k} rollout(s) each:")
        for label, score in (("before", before), ("after", after)):
            note = "" if score.measured else " (recorded)"
            click.echo(f"  {label}\t{score.model}\t{score.score.text()}{note}")
    return {"before": before.to_json(), "after": after.to_json()}


def _line_chosen(settings: Settings, line: str, envs: list[Environment]) -> list[Environment]:
    """``envs`` less those ``line`` may not train on (bot/model_lines.py)."""
    from bot.store.db import Database
    from trainer.envs.lines import line_environments

    db = Database(settings.effective_database_url)
    db.migrate()
    try:
        return line_environments(db, settings.training, line, envs)
    finally:
        db.dispose()


def _pulled_base(settings: Settings) -> str:
    """The configured base model where `ribbit model pull` put it (the trainer, rollout
    workers and evaluation all run with the hub offline and the models volume mounted)."""
    from worker.models import ModelNotReady, local_weights

    in_process = settings.model.model_copy(update={"policy": "transformers"})
    try:
        return local_weights(in_process, settings.effective_weights_dir).model
    except ModelNotReady as exc:
        raise click.ClickException(f"{exc.problem} Run: {exc.fix.removeprefix('run ')}") from None


def _run_figures(steps: list[Any], out: Path) -> str:
    """The end-of-run summary: pass rate, KL, lengths, throughput, failures."""
    if not steps:
        return "no steps taken"
    learned = [r.learner for r in steps if r.learner is not None]
    kl = sum(s.kl for s in learned) / len(learned) if learned else 0.0
    tokens = sum(s.tokens for s in learned)
    learner_s = sum(r.learner_s for r in steps if r.learner is not None)
    rollout_s = sum(r.rollout_s for r in steps)
    n_rollouts = sum(len(r.rewards) for r in steps)
    mean_len = sum(r.mean_generated_tokens * len(r.rewards) for r in steps) / max(n_rollouts, 1)
    return (
        f"pass rate {steps[0].pass_rate:.0%} -> {steps[-1].pass_rate:.0%}; mean KL {kl:.4f}; "
        f"{mean_len:.0f} generated tokens/rollout (max "
        f"{max(r.max_generated_tokens for r in steps)}); learner "
        f"{tokens / learner_s if learner_s else 0:.0f} tokens/s; "
        f"{n_rollouts / rollout_s if rollout_s else 0:.2f} rollouts/s; "
        f"{len(steps) - len(learned)} step(s) skipped (no variance); "
        f"{sum(r.failed_groups for r in steps)} failed group(s); metrics {out / 'metrics.jsonl'}"
    )


# -- model --------------------------------------------------------------------------------------
@click.group()
def model() -> None:
    """Model versions: list, promote (if not worse on held-out), roll back."""


def _db(ctx: click.Context) -> Any:
    from bot.store.db import Database

    db = Database(_settings(ctx).effective_database_url)
    db.migrate()
    return db


@model.command("pull")
@click.argument("model_id", required=False)
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Import from this local folder instead of downloading.",
)
@click.option(
    "--endpoint",
    default=None,
    help="Hub or internal mirror to download from (default: HF_ENDPOINT, else the public hub).",
)
@click.option("--revision", default=None, help="Branch, tag or commit (default: the setting).")
@click.pass_context
def pull_model(
    ctx: click.Context,
    model_id: str | None,
    source: Path | None,
    endpoint: str | None,
    revision: str | None,
) -> None:
    """Put the base weights (MODEL_ID, default RIBBIT_MODEL__MODEL) into the models volume,
    every file checked and its SHA-256 recorded, so workers run with the hub offline."""
    from worker.weights import WeightsError, pull_from_directory, pull_from_hub

    settings = _settings(ctx)
    model_id = model_id or settings.model.model
    root = settings.effective_weights_dir
    try:
        if source is not None:
            manifest = pull_from_directory(source, root, model_id)
        else:
            manifest = pull_from_hub(
                model_id, root, revision=revision or settings.model.revision, endpoint=endpoint
            )
    except WeightsError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"pulled {model_id} ({len(manifest.files)} files, digest {manifest.digest[:16]}) "
        f"into {root / model_id}"
    )


@model.command("verify")
@click.argument("model_id", required=False)
@click.pass_context
def verify_model(ctx: click.Context, model_id: str | None) -> None:
    """Re-hash pulled weights against their recorded SHA-256s."""
    from worker.weights import WeightsError, verify_weights, weights_path

    settings = _settings(ctx)
    model_id = model_id or settings.model.model
    try:
        manifest = verify_weights(weights_path(settings.effective_weights_dir, model_id))
    except WeightsError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{model_id}: {len(manifest.files)} files match (digest {manifest.digest[:16]})")


@model.command("list")
@click.option("--line", default=None, help="Only this model line's versions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of lines.")
@click.pass_context
def list_models(ctx: click.Context, line: str | None, as_json: bool) -> None:
    """List model versions: state, held-out pass@1 [95% interval], adapter, model line."""
    from trainer.registry import versions

    rows = versions(_db(ctx), line)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "name": v.name,
                        "line": v.line,
                        "state": v.state,
                        "base_model": v.base_model,
                        "adapter_path": v.adapter_path,
                        "base_digest": v.base_digest,
                        "adapter_digest": v.adapter_digest,
                        "heldout_pass_rate": v.heldout_pass_rate,
                        "heldout_ci_low": v.heldout_ci_low,
                        "heldout_ci_high": v.heldout_ci_high,
                        "heldout_envs": v.heldout_envs,
                        "heldout_k": v.heldout_k,
                    }
                    for v in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        empty("no model versions; `ribbit train --register NAME` registers one")
    for v in rows:
        rate = _heldout_text(v)
        click.echo(
            f"{v.name}\t{v.state}\theld-out {rate}\t{v.adapter_path or v.base_model}\tline {v.line}"
        )


def _heldout_text(v: Any) -> str:
    """A version's held-out score as `model list` shows it: ``40.0% [11.8%-76.9%]``."""
    if v.heldout_pass_rate is None:
        return "-"
    if v.heldout_ci_low is None or v.heldout_ci_high is None:
        return f"{v.heldout_pass_rate:.1%}"  # scored before intervals were recorded
    return f"{v.heldout_pass_rate:.1%} [{v.heldout_ci_low:.1%}-{v.heldout_ci_high:.1%}]"


@model.command("evaluate")
@click.argument("version")
@click.option(
    "--envs",
    "selector",
    default="split:heldout",
    show_default=True,
    help="Environments to score on.",
)
@click.option("--k", type=int, default=1, show_default=True, help="Rollouts per environment.")
@click.option("--max-turns", type=int, default=100, show_default=True, help="Agent turns.")
@click.option(
    "--max-new-tokens", type=int, default=8192, show_default=True, help="New tokens per model turn."
)
@_store_option
@click.pass_context
def evaluate_model(
    ctx: click.Context,
    version: str,
    selector: str,
    k: int,
    max_turns: int,
    max_new_tokens: int,
    store: Path | None,
) -> None:
    """Score VERSION on held-out environments (stored; promotion compares it)."""
    from bot.settings import AgentSettings
    from trainer.envs.storage import EnvironmentStore
    from trainer.evaluate import evaluate_version
    from trainer.registry import RegistryError
    from worker.agent.episode import SandboxRecipe

    settings = _settings(ctx)
    env_store = EnvironmentStore(_store_dir(ctx, store))
    chosen = env_store.select(selector)
    if not chosen:
        raise click.ClickException(f"no environments match {selector!r}")
    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    try:
        with (
            _checked_out(env_store, chosen, "eval") as pairs,
            progress(f"evaluating {version} ({k} rollouts each)", total=len(chosen)) as steps,
        ):
            report = evaluate_version(
                _db(ctx),
                version,
                pairs,
                SandboxRecipe.production(settings.sandbox),
                limits,
                k=k,
                on_env=lambda env: steps.advance(f"scored {env.instance_id}"),
            )
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    score = report.pass_at_1
    click.echo(
        f"{version}: held-out pass rate {score.rate:.1%} on {score.envs} env(s), "
        f"95% CI {score.low:.1%}-{score.high:.1%} (pass@1 from {k} rollout(s) each)"
    )


@model.command("promote")
@click.argument("version")
@click.option("--force", is_flag=True, help="Promote even if not better on held-out.")
@click.pass_context
def promote_model(ctx: click.Context, version: str, force: bool) -> None:
    """Make VERSION the one workers use; with inference servers, load its adapter on each
    of them first, so no worker asks for a name a server does not know."""
    from bot.model_versions import ModelVersionError
    from trainer.registry import RegistryVersions

    versions = RegistryVersions(_db(ctx), _settings(ctx).model)
    try:
        servers = versions.promote(version, force=force)
    except ModelVersionError as exc:
        raise click.ClickException(str(exc)) from None
    for url in servers:
        click.echo(f"loaded {version} on {url}")
    click.echo(f"promoted {version}")


@model.command("rollback")
@click.option("--line", default="default", show_default=True, help="The model line.")
@click.pass_context
def rollback_model(ctx: click.Context, line: str) -> None:
    """Put back the version promoted before the line's current one (servers keep running)."""
    from bot.model_versions import ModelVersionError
    from trainer.registry import RegistryVersions

    versions = RegistryVersions(_db(ctx), _settings(ctx).model)
    try:
        previous = versions.rollback(line)
    except ModelVersionError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"now serving {previous}" if previous else "now serving the base model")


# -- eval ---------------------------------------------------------------------------------------
@click.command("eval")
@click.argument("repository")
@click.option(
    "--last", type=click.IntRange(min=1), default=10, show_default=True, help="Fixes to try."
)
@click.option(
    "--rev", default="HEAD", show_default=True, help="Branch or commit to walk back from."
)
@click.option(
    "--name",
    "repo_name",
    default=None,
    help="owner/name, for the instance ids (default: from REPOSITORY).",
)
@click.option(
    "--version",
    "version_name",
    default=None,
    help="Model version to run (default: the promoted one, as jobs run it; else the base).",
)
@click.option(
    "--k", type=click.IntRange(min=1), default=1, show_default=True, help="Rollouts per fix."
)
@click.option(
    "--max-turns",
    type=int,
    default=None,
    help="Agent turns (default: the setting; a repository's .ribbit.yml may set its own, as "
    "for its jobs).",
)
@click.option(
    "--max-new-tokens",
    type=int,
    default=None,
    help="New tokens per model turn (default: the setting).",
)
@_test_run_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def eval_command(
    ctx: click.Context,
    repository: str,
    last: int,
    rev: str,
    repo_name: str | None,
    version_name: str | None,
    k: int,
    max_turns: int | None,
    max_new_tokens: int | None,
    reruns: int,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Backtest: what the bot would have done on REPOSITORY's last fixes.

    REPOSITORY is a local clone or a clone URL. Its newest --last commits that changed
    tests and code become environments (base: the commit's parent; setup and test
    commands from the .ribbit.yml committed there), the model runs on each through the
    production episode, and its patch is graded in a fresh sandbox: the resolve rate
    (SWE-bench's verdict, tests only) and the rate that also passes the gates, each with
    its 95% interval, and per fix the model's patch beside the real one."""
    from bot.hostgit import GitError, clone_at
    from trainer.backtest import BacktestReport, backtest, find_fixes
    from trainer.envs.builder import EnvironmentBuilder
    from worker.agent import load_policy
    from worker.agent.episode import SandboxRecipe

    settings = _settings(ctx)
    limits = settings.agent.model_copy(
        update={
            key: value
            for key, value in (("max_turns", max_turns), ("max_new_tokens", max_new_tokens))
            if value is not None
        }
    )
    label, model = _eval_model(ctx, version_name)
    factory = SandboxRecipe.production(settings.sandbox)
    builder = EnvironmentBuilder(factory, reruns=reruns, test_timeout_s=timeout_s)
    work = Path(tempfile.mkdtemp(prefix="ribbit-eval-"))
    try:
        repo_dir = Path(repository)
        try:
            if not repo_dir.is_dir():
                if repository.startswith("-"):
                    raise click.ClickException(f"{repository!r} is not a repository")
                with progress(f"cloning {repository}"):
                    repo_dir = _clone_for_eval(repository, work / "src")
            fixes = find_fixes(repo_dir, last, rev=rev)
        except (GitError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        name = repo_name or _repo_name(repository)
        if not fixes:
            if as_json:
                click.echo(json.dumps(BacktestReport(name, label, k).to_json(), indent=2))
            else:
                empty(f"no commit on {rev} changes both tests and code; nothing to evaluate")
            return
        # Loaded once there is work for it (weights take a while); checked to be there above.
        policy = load_policy(model, limits)

        def checkout_for(env: Environment) -> Path:
            return clone_at(repo_dir, work / "checkouts" / env.instance_id, env.base_commit)

        with progress(f"evaluating {label} on {len(fixes)} fix(es)", total=len(fixes)) as steps:
            report = backtest(
                repo_dir,
                name,
                fixes,
                builder,
                policy,
                limits,
                factory,
                checkout_for,
                model=label,
                k=k,
                gate_settings=settings.gates,
                on_fix=lambda r: steps.advance(f"{r.fix.commit[:12]} done"),
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    _print_backtest(report, rev)


# Transports a clone URL may name: never ext:: (runs a command) nor fd::.
_CLONE_PROTOCOLS = ("https", "http", "ssh", "git", "file")


def _clone_for_eval(url: str, dest: Path) -> Path:
    from bot.hostgit import GitError, run_git

    proc = run_git(
        Path.cwd(),
        "clone",
        "-q",
        "--end-of-options",
        url,
        str(dest),
        config=[("protocol.allow", "never")]
        + [(f"protocol.{p}.allow", "always") for p in _CLONE_PROTOCOLS],
        inherit=("SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "HTTPS_PROXY", "NO_PROXY"),
        timeout=600,
    )
    if proc.returncode != 0:
        raise GitError(f"git clone failed: {proc.stderr.decode(errors='replace').strip()}")
    return dest


def _eval_model(ctx: click.Context, version_name: str | None) -> tuple[str, Any]:
    """(label, model settings) for `ribbit eval`: a named version, or what jobs of the
    default line run now, checked to be there as a job checks it."""
    from trainer.store import ModelVersion
    from worker.models import (
        ModelNotReady,
        PromotedVersion,
        model_for_jobs,
        promoted_version,
        ready,
        with_version,
    )

    settings = _settings(ctx)
    db = _db(ctx)
    if version_name is not None:
        from sqlalchemy import select

        with db.session() as s:
            row = s.scalar(select(ModelVersion).where(ModelVersion.name == version_name))
            if row is None:
                raise click.ClickException(f"no version {version_name!r}")
            chosen = PromotedVersion(
                row.name, row.base_model, Path(row.adapter_path) if row.adapter_path else None
            )
        label, model = version_name, with_version(settings.model, chosen)
    else:
        current = promoted_version(db)
        label = current.name if current is not None else f"base {settings.model.model}"
        model = model_for_jobs(db, settings.model)
    if model.policy == "replay":
        label = f"{label} (replay)"
    try:
        return label, ready(model, settings)
    except ModelNotReady as exc:
        raise click.ClickException(str(exc)) from None


def _repo_name(repository: str) -> str:
    """owner/name from a clone URL or path (its last two parts, .git dropped)."""
    parts = [p for p in re.split(r"[/:]", repository.rstrip("/")) if p]
    parts[-1:] = [parts[-1].removesuffix(".git")] if parts else []
    return "/".join(parts[-2:]) or "local/repo"


def _print_backtest(report: Any, rev: str) -> None:
    from trainer.backtest import short_diff

    click.echo(f"{report.repo} at {rev}: {report.model} on its last {len(report.fixes)} fix(es)")
    for r in report.fixes:
        head = f"  {r.fix.commit[:12]}  {r.fix.title[:60]}"
        if r.rejected is not None:
            click.echo(f"{head}\tskipped: {r.rejected.splitlines()[0][:200]}")
            continue
        verdict = "resolved" if r.resolved else "not resolved"
        gates = "gates pass" if r.rewarded else f"reward 0 ({r.reason})"
        click.echo(f"{head}\t{verdict} {r.resolved}/{r.rollouts}, {gates}")
    resolve, reward = report.resolve_rate, report.reward_rate
    if resolve is None or reward is None:
        click.echo("no fix could be built into an environment; nothing was scored")
        return
    click.echo(f"resolve rate (SWE-bench, tests only): {resolve.text()}")
    click.echo(f"resolved and gates pass (Ribbit's reward): {reward.text()}")
    for r in report.scored:
        click.echo(
            f"\n{r.fix.commit[:12]} {r.fix.title}: {'resolved' if r.resolved else 'not resolved'}"
        )
        click.echo(
            "  the model's patch:" if r.model_diff.strip() else "  the model's patch: (none)"
        )
        for text in short_diff(r.model_diff).splitlines() if r.model_diff.strip() else []:
            click.echo(f"    {text}")
        click.echo("  the real fix:")
        for text in short_diff(r.real_diff).splitlines():
            click.echo(f"    {text}")
