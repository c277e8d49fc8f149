"""`ribbit eval`: backtest what the bot would have done on a repository's last fixes."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from bot.console import echo_json, empty, progress
from trainer.cli.common import open_db, sandbox_errors, settings_of, validation_run_options
from trainer.envs.schema import Environment


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
@validation_run_options
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

    settings = settings_of(ctx)
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
                echo_json(BacktestReport(name, label, k).to_json())
            else:
                empty(f"no commit on {rev} changes both tests and code; nothing to evaluate")
            return
        # Loaded once there is work for it (weights take a while); checked to be there above.
        policy = load_policy(model, limits)

        def checkout_for(env: Environment) -> Path:
            return clone_at(repo_dir, work / "checkouts" / env.instance_id, env.base_commit)

        with (
            sandbox_errors(),
            progress(f"evaluating {label} on {len(fixes)} fix(es)", total=len(fixes)) as steps,
        ):
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
        echo_json(report.to_json())
        return
    _print_backtest(report, rev)


# Transports a clone URL may name: never ext:: (runs a command) nor fd::.
_CLONE_PROTOCOLS = ("https", "http", "ssh", "git", "file")


def _clone_for_eval(url: str, dest: Path) -> Path:
    from bot.hostgit import git_ok

    git_ok(
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
    return dest


def _eval_model(ctx: click.Context, version_name: str | None) -> tuple[str, Any]:
    """(label, model settings) for `ribbit eval`: a named version, or what jobs of the
    default line run now, checked to be there as a job checks it."""
    from trainer.store import version_named
    from worker.model_choice import (
        ModelNotReady,
        model_for_jobs,
        promoted_version,
        ready,
        with_version,
    )

    settings = settings_of(ctx)
    db = open_db(ctx)
    if version_name is not None:
        chosen = version_named(db, version_name)
        if chosen is None:
            raise click.ClickException(f"no version {version_name!r} (or it was revoked)")
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
    click.echo(f"resolve rate (tests only, the whole suite): {resolve.text()}")
    if report.swebench_rate is not None:
        click.echo(f"resolve rate (SWE-bench's harness rule): {report.swebench_rate.text()}")
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
