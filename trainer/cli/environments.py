"""`ribbit envs`: training environments built from merged fixes (SWE-bench compatible):
build, list, show, grade, export, image, import, from-outcomes, calibrate."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.cli_options import REPO_HELP, REPO_REF, checkout_option, forge_option
from bot.console import echo_json, empty, progress
from bot.forges.base import RepoRef
from trainer.cli.common import (
    agent_limit_options,
    env_folders,
    envs_option,
    open_db,
    rollouts_option,
    sandbox_errors,
    selected,
    settings_of,
    store_option,
    summary,
    sync_store_index,
    validation_run_options,
)

if TYPE_CHECKING:
    from trainer.calibrate import CalibrationReport
    from worker.repo_config import RepoConfig


@click.group()
def envs() -> None:
    """Training environments built from merged fixes (SWE-bench compatible)."""


@envs.command("build")
@checkout_option("The repository's git clone, holding --base and --fix")
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
    "repo_ref",
    type=REPO_REF,
    required=True,
    help=f"Its model line follows this repository ({REPO_HELP}).",
)
@forge_option(
    "The repository's forge (where --name has no forge: prefix): which model line may train on it.",
    required=True,
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
@click.option(
    "--issue-number",
    type=int,
    default=None,
    help="The issue the fix closed, on --forge's --name: its comments are read from the "
    "configured forge and judged as a solve job judges them (writers' kept), and its "
    "number goes in the task's footer.",
)
@click.option(
    "--comments-file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help='The issue\'s comments as JSON, [{"author", "trust": "writer|outsider|bot", '
    '"body"}], after those of --issue-number.',
)
@validation_run_options
@click.option("--json", "as_json", is_flag=True, help="Print the environment as JSON.")
@store_option
@click.pass_context
def build_env(
    ctx: click.Context,
    checkout: Path,
    base: str,
    fix: str,
    issue_file: Path,
    repo_ref: RepoRef,
    forge: str,
    test_command: str | None,
    setup_commands: tuple[str, ...],
    issue_number: int | None,
    comments_file: Path | None,
    reruns: int,
    timeout_s: float,
    as_json: bool,
    store: Path | None,
) -> None:
    """Build one environment from a fix (rejected ones are kept with their reason) for the
    model line of its repository (--forge, --name); setup, test and image from the
    .ribbit.yml at the base, as a solve job on that commit read them, unless given; the
    issue's comments (--issue-number, --comments-file) as a solve job would show them."""
    from trainer.cli.issue_comments import issue_comments
    from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
    from trainer.envs.schema import Provenance
    from worker.agent.episode import SandboxRecipe

    base, fix = _commit(checkout, base, "--base"), _commit(checkout, fix, "--fix")
    settings = settings_of(ctx)
    config = _repo_config_at(checkout, base, settings.sandbox.detect_setup)
    comments = issue_comments(
        settings, repo_ref.forge, repo_ref.full_name, number=issue_number, path=comments_file
    )
    env_store = env_folders(ctx, store)
    builder = EnvironmentBuilder(
        SandboxRecipe.production(settings.sandbox), reruns=reruns, test_timeout_s=timeout_s
    )
    issue = issue_file.read_text(encoding="utf-8")
    spec = BuildSpec(
        *(checkout, base, fix, issue),
        repo=repo_ref.full_name,
        test_command=test_command or config.test,
        setup_commands=setup_commands or ((config.setup,) if config.setup else ()),
        image=config.image,
        provenance=Provenance(source="local", forge=repo_ref.forge, issue_number=issue_number),
        comments=comments,
    )
    try:
        with (
            sandbox_errors(),
            progress(f"building {repo_ref.full_name} at {fix[:12]} (tests run {reruns}x per tree)"),
        ):
            env = builder.build(spec)
        env_store.add(env, checkout)
    except BuildRejected as exc:
        env_store.reject(exc.rejection)
        raise click.ClickException(f"rejected: {exc}") from None
    sync_store_index(ctx, env_store)
    click.echo(env.model_dump_json(indent=2) if as_json else summary(env))


def _repo_config_at(checkout: Path, base: str, detect_setup: bool) -> RepoConfig:
    """The .ribbit.yml committed at ``base``, its setup detected when it names none, as
    the solve job on that commit would set up."""
    from worker.repo_config import RepoConfigError, read_repo_config
    from worker.sandbox.setupcmd import commit_files, with_detected_setup

    try:
        config = read_repo_config(checkout, base)
    except RepoConfigError as exc:
        raise click.ClickException(str(exc)) from None
    return with_detected_setup(config, commit_files(checkout, base), enabled=detect_setup)


def _commit(checkout: Path, rev: str, flag: str) -> str:
    """The full sha of a revision given on the command line (``f51a53b^`` too)."""
    from bot.hostgit import GitError, revision_commit

    try:
        return revision_commit(checkout, rev)
    except GitError as exc:
        raise click.BadParameter(str(exc), param_hint=flag) from None


@envs.command("list")
@store_option
@click.option("--rejected", is_flag=True, help="List rejected candidates instead.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of lines.")
@click.pass_context
def list_envs(ctx: click.Context, store: Path | None, rejected: bool, as_json: bool) -> None:
    """List environments (or rejections, with their reasons)."""
    env_store = env_folders(ctx, store)
    if rejected:
        rejections = list(env_store.rejections())
        if as_json:
            echo_json([r.model_dump(mode="json") for r in rejections])
        elif not rejections:
            empty(f"no rejected candidates in {env_store.root}")
        for r in [] if as_json else rejections:
            click.echo(f"{r.candidate}\t{r.reason}\t{r.detail}")
        return
    found = list(env_store)
    if as_json:
        echo_json([e.model_dump(mode="json") for e in found])
    elif not found:
        empty(
            f"no environments in {env_store.root}; build them with `ribbit envs build` or "
            "`ribbit envs from-outcomes`"
        )
    for env in [] if as_json else found:
        click.echo(summary(env))


@envs.command("show")
@click.argument("instance_id")
@store_option
@click.pass_context
def show_env(ctx: click.Context, instance_id: str, store: Path | None) -> None:
    """Print one environment as JSON."""
    try:
        env = env_folders(ctx, store).get(instance_id)
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
@store_option
@click.pass_context
def grade_env(
    ctx: click.Context, instance_id: str, patch_file: Path, as_json: bool, store: Path | None
) -> None:
    """Grade one patch on one environment, as training does, in a fresh sandbox: the
    SWE-bench verdict (tests only) and Ribbit's reward (tests and gates)."""
    from trainer.rl.reward import compute_reward
    from worker.agent.episode import SandboxRecipe

    settings = settings_of(ctx)
    env_store = env_folders(ctx, store)
    try:
        env = env_store.get(instance_id)
    except (KeyError, ValueError):
        raise click.ClickException(f"no environment {instance_id!r}") from None
    patch = patch_file.read_text(encoding="utf-8", errors="replace")
    with sandbox_errors(), tempfile.TemporaryDirectory(prefix="ribbit-grade-") as tmp:
        checkout = env_store.checkout(env, Path(tmp) / "repo")
        result = compute_reward(
            env,
            patch,
            checkout,
            SandboxRecipe.production(settings.sandbox),
            gate_settings=settings.gates,
        )
    if as_json:
        echo_json({"instance_id": env.instance_id, **result.to_json()})
        return
    click.echo(
        f"{env.instance_id}: resolved={result.resolved} "
        f"swebench_resolved={result.swebench_resolved} reward={result.reward}"
    )
    click.echo(f"  {result.reason}")
    for test_id in result.failed_tests:
        click.echo(f"  not passed: {test_id}")
    for f in result.findings:
        click.echo(f"  {f.gate}/{f.rule}: {f.message}")


@envs.command("export")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@envs_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["ribbit", "swebench", "skyrl", "verl"]),
    default="ribbit",
    show_default=True,
    help="Record shape (see trainer/README.md, Larger runs).",
)
@store_option
@click.pass_context
def export_envs(
    ctx: click.Context, path: Path, selector: str, fmt: str, store: Path | None
) -> None:
    """Write environments as JSON lines: Ribbit's records (every field; SWE-bench's
    fields first), SWE-bench instances only, or SkyRL / verl dataset rows."""
    env_store = env_folders(ctx, store)
    n = env_store.export_jsonl(path, selected(env_store, selector, allow_none=True), fmt)
    click.echo(f"exported {n} environment(s) to {path} ({fmt})")
    if fmt in ("skyrl", "verl"):
        click.echo("their images: ribbit envs image (one per environment, repo in /testbed)")


@envs.command("image")
@envs_option
@click.option(
    "--base-image",
    default=None,
    help="Image to build on (default: the sandbox image, RIBBIT_SANDBOX__IMAGE).",
)
@store_option
@click.option(
    "--json", "as_json", is_flag=True, help="Each environment's image tag as a JSON list."
)
@click.pass_context
def image_envs(
    ctx: click.Context, selector: str, base_image: str | None, store: Path | None, as_json: bool
) -> None:
    """Build one container image per environment with its repository at the base commit
    in /testbed: what SkyRL's SWE example (and the exported eval_script) run in."""
    from trainer.envs.export import build_testbed_image
    from worker.sandbox.base import SandboxError
    from worker.sandbox.docker import docker_client

    settings = settings_of(ctx)
    env_store = env_folders(ctx, store)
    chosen = selected(env_store, selector)
    try:
        client = docker_client(settings.sandbox, timeout=600)
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from None
    import docker

    built = []
    for env in chosen:
        try:
            tag = build_testbed_image(
                env, env_store, client, base_image=base_image or settings.sandbox.image
            )
        except (docker.errors.BuildError, docker.errors.APIError, FileNotFoundError) as exc:
            raise click.ClickException(f"{env.instance_id}: {exc}") from None
        # Each line as its image is built (builds take minutes); under --json on stderr.
        click.echo(f"{env.instance_id}\t{tag}", err=as_json)
        built.append({"instance_id": env.instance_id, "image": tag})
    if as_json:
        echo_json(built)


@envs.command("split")
@click.option("--line", default="default", show_default=True, help="The model line.")
@click.option(
    "--fraction",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Hold out this fraction of each repository's newest fixes (default 0.2).",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="Hold out each repository's newest COUNT fixes instead.",
)
@store_option
@click.option("--json", "as_json", is_flag=True, help="The split as one JSON object.")
@click.pass_context
def split_envs(
    ctx: click.Context,
    line: str,
    fraction: float | None,
    count: int | None,
    store: Path | None,
    as_json: bool,
) -> None:
    """Hold out LINE's newest fixes, per repository, so the line is scored on its future
    and never trains on it. One-way: held-out environments stay held out, and one a
    version of the line trained on is never held out."""
    from trainer.envs.lines import line_environments
    from trainer.envs.splits import plan_split
    from trainer.store import TrainerStore

    if fraction is not None and count is not None:
        raise click.UsageError("give --fraction or --count, not both")
    db = open_db(ctx)
    env_store = env_folders(ctx, store)
    mine = line_environments(db, settings_of(ctx).training, line, list(env_store))
    if not mine:
        raise click.ClickException(f"no environments belong to line {line!r}")
    plan = plan_split(
        mine,
        fraction=None if count is not None else (fraction or 0.2),
        count=count,
        trained=TrainerStore(db).trained_instance_ids(line),
    )
    for env in mine:
        if env.instance_id in plan.newly:
            env_store.update(env.model_copy(update={"split": "heldout"}))
    sync_store_index(ctx, env_store)
    if as_json:
        held = {"line": line, "heldout": plan.heldout, "newly_heldout": plan.newly}
        training_count = len(mine) - len(plan.heldout)
        kept = {"kept_in_train": plan.trained_on, "training_count": training_count}
        echo_json({**held, **kept})
        return
    for instance_id in plan.trained_on:
        click.echo(f"{instance_id}	kept in train: a version of line {line} trained on it")
    click.echo(
        f"line {line}: {len(plan.heldout)} held out ({len(plan.newly)} new), "
        f"{len(mine) - len(plan.heldout)} for training"
    )


@envs.command("import")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "--forge",
    type=click.Choice(["github", "gitlab"]),
    default=None,
    help="The forge of every record's repository, as you know it (a record's own is never "
    "trusted); without it the environments train no model line.",
)
@store_option
@click.option("--json", "as_json", is_flag=True, help="What was imported as one JSON object.")
@click.pass_context
def import_envs(
    ctx: click.Context, path: Path, forge: str | None, store: Path | None, as_json: bool
) -> None:
    """Read SWE-bench (or Ribbit) JSONL; duplicates are refused and listed."""
    env_store = env_folders(ctx, store)
    try:
        imported, refused = env_store.import_jsonl(path, forge=forge)
    except ValueError as exc:  # a line that is not JSON, or not an environment
        raise click.ClickException(f"{path}: not SWE-bench or Ribbit JSONL: {exc}") from None
    sync_store_index(ctx, env_store)
    if as_json:
        # forge null: the imported environments train no model line.
        rejections = [r.model_dump(mode="json") for r in refused]
        echo_json({"imported": imported, "refused": rejections, "forge": forge})
        return
    click.echo(f"imported {len(imported)}, refused {len(refused)}")
    if forge is None and imported:
        click.echo("no --forge given: the imported environments train no model line")
    for r in refused:
        click.echo(f"  {r.candidate}: {r.reason} ({r.detail})")


@envs.command("from-outcomes")
@forge_option(
    "The forge the outcomes were recorded on, where --name has no forge: prefix.",
    required=True,
)
@click.option(
    "--name",
    "repo_ref",
    type=REPO_REF,
    required=True,
    help=f"The repository whose outcomes to build from ({REPO_HELP}).",
)
@checkout_option("A clone of the repository holding the PRs' base commits")
@click.option(
    "--test-command",
    default=None,
    help="Overrides the test command each job recorded from .ribbit.yml.",
)
@validation_run_options
@store_option
@click.option(
    "--json", "as_json", is_flag=True, help="What was built and rejected as one JSON object."
)
@click.pass_context
def envs_from_outcomes(
    ctx: click.Context,
    forge: str,
    repo_ref: RepoRef,
    checkout: Path,
    test_command: str | None,
    reruns: int,
    timeout_s: float,
    store: Path | None,
    as_json: bool,
) -> None:
    """Build environments from recorded PR outcomes (merged: built; closed: kept as
    negative examples with review comments)."""
    from trainer.envs.builder import EnvironmentBuilder
    from trainer.envs.candidates import environments_from_outcomes
    from trainer.envs.index import sync_index
    from worker.agent.episode import SandboxRecipe

    settings = settings_of(ctx)
    builder = EnvironmentBuilder(
        SandboxRecipe.production(settings.sandbox), reruns=reruns, test_timeout_s=timeout_s
    )
    db = open_db(ctx)
    env_store = env_folders(ctx, store)
    with (
        sandbox_errors(),
        progress(f"building environments from {repo_ref}'s outcomes"),
    ):
        report = environments_from_outcomes(
            db,
            repo_ref.forge,
            repo_ref.full_name,
            checkout,
            builder,
            env_store,
            test_command=test_command,
        )
    sync_index(db, env_store)
    if as_json:
        # envs list --json's records, and envs list --rejected --json's.
        built = [e.model_dump(mode="json") for e in report.built]
        rejected = [r.model_dump(mode="json") for r in report.rejected]
        echo_json({"built": built, "rejected": rejected})
        return
    if not report.built and not report.rejected:
        empty(f"no recorded outcomes for {repo_ref}; see `ribbit outcomes`")
    for env in report.built:
        click.echo(f"built {summary(env)}")
    for r in report.rejected:
        click.echo(f"rejected {r.candidate}: {r.reason} ({r.detail})")


@envs.command("calibrate")
@envs_option
@rollouts_option(4)
@click.option(
    "--model",
    "model_path",
    default=None,
    help="Model to calibrate with (default: the promoted version, else the base).",
)
@agent_limit_options
@store_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The model and each environment's result as one JSON object (progress on stderr).",
)
@click.pass_context
def calibrate_envs(
    ctx: click.Context,
    selector: str,
    k: int,
    model_path: str | None,
    max_turns: int,
    max_new_tokens: int,
    store: Path | None,
    as_json: bool,
) -> None:
    """k rollouts per environment; pass@k stored, always/never solved marked (no signal)."""
    from trainer.checkouts import checked_out
    from trainer.evaluate import Exam, score_model
    from trainer.registry import promoted_model
    from worker.agent.episode import SandboxRecipe
    from worker.settings import AgentSettings

    settings = settings_of(ctx)
    env_store = env_folders(ctx, store)
    chosen = selected(env_store, selector)
    base, adapter, version = model_path or settings.model.model, None, None
    if model_path is None:
        current = promoted_model(open_db(ctx))
        if current is not None:
            base, adapter, version = current.base_model, current.adapter_path, current.name
    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    with (
        sandbox_errors(),
        checked_out(env_store, chosen, "calibrate") as pairs,
        progress(f"calibrating ({k} rollouts each)", total=len(chosen)) as steps,
    ):
        # The model loads once the environments are checked out, as `model evaluate`'s
        # does: a checkout that fails costs no load of the weights.
        exam = Exam(
            pairs,
            SandboxRecipe.production(settings.sandbox),
            limits,
            k=k,
            on_env=lambda env: steps.advance(f"calibrated {env.instance_id}"),
        )
        report = score_model(base, adapter, exam)
    for env in chosen:  # stored, and said, in the order the environments were chosen
        calibration = report.calibrations[env.instance_id]
        env_store.update(env.model_copy(update={"calibration": calibration}))
        if not as_json:
            signal = "signal" if calibration.has_signal else "no signal"
            click.echo(f"{env.instance_id}\tpass {calibration.solved}/{calibration.k}\t{signal}")
    sync_store_index(ctx, env_store)
    if as_json:
        # version: the promoted version whose adapter calibrated; null for the base or --model.
        facts = {"base_model": base, "adapter_path": adapter, "version": version, "k": k}
        results = _calibrations_json(report, [env.instance_id for env in chosen])
        echo_json({**facts, "results": results})


def _calibrations_json(report: CalibrationReport, order: list[str]) -> list[dict[str, object]]:
    """Each environment's result in ``order``, with `model evaluate --json`'s fields and
    its signal."""
    return [
        {"instance_id": i, "k": c.k, "solved": c.solved, "has_signal": c.has_signal}
        for i, c in ((i, report.calibrations[i]) for i in order)
    ]
