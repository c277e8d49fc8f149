"""`ribbit model`: model versions (pull and verify the base weights; list, evaluate,
promote, roll back the trained ones)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot.cli_audit import actor_option, audited, cli_actor
from bot.console import echo_json, empty, progress
from trainer.cli.common import (
    agent_limit_options,
    env_folders,
    line_heldout,
    open_db,
    rollouts_option,
    sandbox_errors,
    selected,
    settings_of,
    store_option,
)

if TYPE_CHECKING:
    from trainer.evaluate import Exam, HeldoutEvaluation
    from worker.weights import WeightsManifest

T = TypeVar("T")


@click.group()
def model() -> None:
    """Model versions: list, promote (if not worse on held-out), roll back."""


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
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="What was pulled as a JSON object (verify's fields, and already_pulled).",
)
@click.pass_context
def pull_model(
    ctx: click.Context,
    model_id: str | None,
    source: Path | None,
    endpoint: str | None,
    revision: str | None,
    as_json: bool,
) -> None:
    """Put the base weights (MODEL_ID, default RIBBIT_MODEL__MODEL) into the models volume,
    every file checked and its SHA-256 recorded, so workers run with the hub offline."""
    from worker.weights import WeightsError, pull_from_directory, pull_from_hub, weights_path

    settings = settings_of(ctx)
    model_id = model_id or settings.model.model
    root = settings.effective_weights_dir
    downloaded = True
    try:
        path = weights_path(root, model_id)
        if source is not None:
            manifest = pull_from_directory(source, root, model_id)
        else:
            manifest, downloaded = pull_from_hub(
                model_id, root, revision=revision or settings.model.revision, endpoint=endpoint
            )
    except WeightsError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json({**_weights_json(model_id, path, manifest), "already_pulled": not downloaded})
        return
    what = f"{model_id} ({len(manifest.files)} files, digest {manifest.digest[:16]})"
    if downloaded:
        click.echo(f"pulled {what} into {path}")
    else:
        click.echo(f"already pulled: {what} in {path}, every file re-checked")


@model.command("verify")
@click.argument("model_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="What was verified as a JSON object.")
@click.pass_context
def verify_model(ctx: click.Context, model_id: str | None, as_json: bool) -> None:
    """Re-hash pulled weights against their recorded SHA-256s."""
    from worker.weights import WeightsError, verify_weights, weights_path

    settings = settings_of(ctx)
    model_id = model_id or settings.model.model
    try:
        path = weights_path(settings.effective_weights_dir, model_id)
        manifest = verify_weights(path)
    except WeightsError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json(_weights_json(model_id, path, manifest))
        return
    click.echo(f"{model_id}: {len(manifest.files)} files match (digest {manifest.digest[:16]})")


def _weights_json(model_id: str, path: Path, manifest: WeightsManifest) -> dict[str, object]:
    """What pull --json and verify --json both say of the weights in ``path``, so a
    script reads the two alike (pull adds already_pulled)."""
    return {
        "model": model_id,
        "path": str(path),
        "files": len(manifest.files),
        "digest": manifest.digest,
    }


@model.command("list")
@click.option("--line", default=None, help="Only this model line's versions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of lines.")
@click.pass_context
def list_models(ctx: click.Context, line: str | None, as_json: bool) -> None:
    """List model versions: state, held-out pass@1 [95% interval], adapter, model line."""
    from trainer.registry import versions

    rows = versions(open_db(ctx), line)
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
                        "heldout_judge": v.heldout_judge,
                        "parent_version": v.parent_version,
                        "revoked_reason": v.revoked_reason,
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


# Both scoring commands print the same record (HeldoutEvaluation), so a script reads either.
_evaluation_json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The score and each environment's result as one JSON object (progress on stderr).",
)


@model.command("evaluate")
@click.argument("version")
@click.option(
    "--envs",
    "selector",
    default="split:heldout",
    show_default=True,
    help="Environments to score on (only the version's line's held-out ones are used).",
)
@rollouts_option(1)
@agent_limit_options
@store_option
@_evaluation_json_option
@click.pass_context
def evaluate_model(
    ctx: click.Context,
    version: str,
    selector: str,
    k: int,
    max_turns: int,
    max_new_tokens: int,
    store: Path | None,
    as_json: bool,
) -> None:
    """Score VERSION on held-out environments (stored; promotion compares it)."""
    from trainer.evaluate import HeldoutEvaluation, evaluate_version
    from trainer.store import TrainerStore
    from worker.settings import AgentSettings

    settings = settings_of(ctx)
    env_store = env_folders(ctx, store)
    picked = selected(env_store, selector)
    row = TrainerStore(open_db(ctx)).version(version)
    if row is None:
        raise click.ClickException(f"no version {version!r}")
    chosen = line_heldout(ctx, picked, row.line)
    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    report = _score_heldout(
        settings,
        env_store,
        chosen,
        version,
        limits,
        k,
        lambda exam: evaluate_version(open_db(ctx), version, exam),
    )
    _print_evaluation(HeldoutEvaluation(row.base_model, version, row.line, k, report), as_json)


@model.command("evaluate-base")
@click.option("--line", default="default", show_default=True, help="The model line.")
@click.option(
    "--model",
    "base_model",
    default=None,
    help="The base model (default: the setting); a line's first version is compared with it.",
)
@rollouts_option(1)
@agent_limit_options
@store_option
@_evaluation_json_option
@click.pass_context
def evaluate_base_model(
    ctx: click.Context,
    line: str,
    base_model: str | None,
    k: int,
    max_turns: int,
    max_new_tokens: int,
    store: Path | None,
    as_json: bool,
) -> None:
    """Score the base model on LINE's held-out environments (stored per environment: a
    line's first version must beat it to be promoted)."""
    from trainer.evaluate import HeldoutEvaluation, evaluate_base
    from worker.settings import AgentSettings

    settings = settings_of(ctx)
    model_id = base_model or settings.model.model
    env_store = env_folders(ctx, store)
    chosen = line_heldout(ctx, selected(env_store, "split:heldout"), line)
    limits = AgentSettings(max_turns=max_turns, max_new_tokens=max_new_tokens)
    report = _score_heldout(
        settings,
        env_store,
        chosen,
        f"base {model_id}",
        limits,
        k,
        lambda exam: evaluate_base(open_db(ctx), line, model_id, exam),
    )
    _print_evaluation(HeldoutEvaluation(model_id, None, line, k, report), as_json)


def _print_evaluation(evaluation: HeldoutEvaluation, as_json: bool) -> None:
    """Stdout holds only the result: the progress bar is on stderr (bot/console.py), so
    ``--json`` output parses whatever the terminal showed meanwhile."""
    if as_json:
        echo_json(evaluation.to_json())
    else:
        click.echo(evaluation.text())


def _score_heldout(
    settings: Any,
    env_store: Any,
    chosen: list[Any],
    label: str,
    limits: Any,
    k: int,
    evaluate: Callable[[Exam], T],
) -> T:
    """``evaluate(exam)`` on ``chosen``'s checkouts, ``k`` rollouts each, with a progress
    bar naming ``label``; a registry refusal is the command's error."""
    from trainer.checkouts import checked_out
    from trainer.evaluate import Exam
    from trainer.registry import RegistryError
    from worker.agent.episode import SandboxRecipe

    try:
        with (
            sandbox_errors(),
            checked_out(env_store, chosen, "eval") as pairs,
            progress(f"evaluating {label} ({k} rollouts each)", total=len(chosen)) as steps,
        ):
            recipe = SandboxRecipe.production(settings.sandbox)
            return evaluate(
                Exam(
                    pairs, recipe, limits, k, lambda env: steps.advance(f"scored {env.instance_id}")
                )
            )
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


@model.command("promote")
@click.argument("version")
@click.option(
    "--force",
    is_flag=True,
    help="Promote without the evidence (not better, too few or not comparable held-out "
    "results); the audit row says what was skipped.",
)
@actor_option
@click.option("--json", "as_json", is_flag=True, help="What was promoted as a JSON object.")
@click.pass_context
def promote_model(
    ctx: click.Context, version: str, force: bool, actor: str | None, as_json: bool
) -> None:
    """Make VERSION the one workers use, if better than what it replaces (the line's
    promoted version, else the base model) by a one-sided exact sign test on the same
    held-out environments; with inference servers, load its adapter on each of them
    first, so no worker asks for a name a server does not know."""
    from bot.model_versions import ModelVersionError
    from trainer.registry import RegistryVersions, promotion_check

    db = open_db(ctx)
    versions = RegistryVersions(db, settings_of(ctx).model)
    servers: list[str] = []

    def run() -> str:
        check = promotion_check(db, version, force=force)
        servers.extend(versions.promote(version, force=force))
        if check.skipped:
            return f"promoted {version} (forced; skipped: {'; '.join(check.skipped)})"
        return f"promoted {version}: {check.evidence}" + (" (--force not needed)" if force else "")

    try:
        message = audited(db, cli_actor(actor), "promote", f"model:{version}", run)
    except ModelVersionError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        facts = {"promoted": version, "forced": force, "loaded_on": servers}
        echo_json({**facts, "message": message})
        return
    for url in servers:
        click.echo(f"loaded {version} on {url}")
    click.echo(message)


@model.command("rollback")
@click.option("--line", default="default", show_default=True, help="The model line.")
@actor_option
@click.option("--json", "as_json", is_flag=True, help="What is served now as a JSON object.")
@click.pass_context
def rollback_model(ctx: click.Context, line: str, actor: str | None, as_json: bool) -> None:
    """Put back the version promoted before the line's current one (servers keep running)."""
    from bot.model_versions import ModelVersionError
    from trainer.registry import RegistryVersions

    db = open_db(ctx)
    versions = RegistryVersions(db, settings_of(ctx).model)
    serving: list[str | None] = []

    def run() -> str:
        serving.append(versions.rollback(line))
        return f"now serving {serving[0]}" if serving[0] else "now serving the base model"

    try:
        message = audited(db, cli_actor(actor), "rollback", f"model line:{line}", run)
    except ModelVersionError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        # serving None: the line is back on the base model.
        echo_json({"line": line, "serving": serving[0], "message": message})
    else:
        click.echo(message)
