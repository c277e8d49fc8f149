"""`ribbit train`: GRPO on stored environments, as trainer/training_run.py runs it.

Its training options are TrainSettings' fields (trainer/cli/options.py makes them, as
TRL's scripts make their parsers from config dataclasses); the options written here are
the run's own (trainer.training_run.RunOptions) and the output's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from bot.console import echo_json, progress
from trainer.cli.common import open_db, sandbox_errors, settings_of, store_dir
from trainer.cli.options import OptionOverride, settings_options
from trainer.config import TrainSettings
from trainer.rl.tamper import TAMPERED_FILE
from worker.settings import WorkerSettings

if TYPE_CHECKING:
    from trainer.distributed import Ranks
    from trainer.train import StepRecord
    from trainer.training_run import HeldoutComparison, RolloutMode, RunOptions, RunResult

# The fields whose default is the deployment's, resolved as the run starts, and the one
# option older than the generated names (--store, as every trainer command spells it).
TRAIN_OVERRIDES = {
    "model": OptionOverride(default_from="RIBBIT_MODEL__MODEL"),
    "store_dir": OptionOverride(flag="--store", default_from="DATA_DIR/trainer", folder=True),
    "output_dir": OptionOverride(default_from="a new run folder in the store", folder=True),
}


@click.command("train")
@settings_options(TrainSettings, TRAIN_OVERRIDES)
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="A checkpoint folder (step-N) to continue from.",
)
@click.option(
    "--register",
    default=None,
    help="Register the final adapter as a candidate model version.",
)
@click.option(
    "--rollouts",
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
@click.pass_context
def train(
    ctx: click.Context,
    resume: Path | None,
    register: str | None,
    rollouts: str,
    in_flight: int,
    line: str,
    heldout: str | None,
    heldout_k: int,
    as_json: bool,
    **fields: Any,
) -> None:
    """GRPO on stored environments, with the worker's agent loop and the real reward.

    Data parallel on one machine: ``torchrun --nproc-per-node N -m bot train ...``
    (rank 0 alone writes the database, checkpoints and progress)."""
    from trainer.distributed import process_group
    from trainer.training_run import RunOptions

    options = RunOptions(
        resume=resume,
        register=register,
        rollouts=cast("RolloutMode", rollouts),
        in_flight=in_flight,
        line=line,
        heldout=heldout,
        heldout_k=heldout_k,
    )
    with process_group() as ranks, sandbox_errors():
        _run(ctx, ranks, train_settings(ctx, ranks, fields), options, as_json=as_json)


def train_settings(ctx: click.Context, ranks: Ranks, fields: dict[str, Any]) -> TrainSettings:
    """The options' TrainSettings, the deployment's defaults filled in."""
    settings = settings_of(ctx)
    root = store_dir(ctx, fields["store_dir"])
    # Every rank uses the folder rank 0 names (a default named by the clock could differ).
    # Absolute: the registered version records its checkpoint's path, which a worker
    # started from another folder must find.
    out = ranks.broadcast_object(
        str(
            Path(
                fields["output_dir"] or root / "runs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
            ).absolute()
        )
    )
    model = fields["model"] or _pulled_base(settings)
    try:
        return TrainSettings(
            **{**fields, "model": model, "store_dir": str(root), "output_dir": out}
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _run(
    ctx: click.Context, ranks: Ranks, cfg: TrainSettings, options: RunOptions, *, as_json: bool
) -> None:

    from trainer.training_run import TrainingRun, TrainingRunError

    db = open_db(ctx) if ranks.is_main else None
    try:
        run = TrainingRun.open(cfg, options, settings_of(ctx), ranks, db=db)
        with run:
            steps_left = run.load()
            result = _train_with_progress(run.train, steps_left, ranks)
        if not ranks.is_main:
            return
        if not as_json:
            click.echo(_run_line(result))
            click.echo(_run_figures(result.steps, result.output_dir))
        registered = run.register(result)
        if registered and not as_json:
            click.echo(f"registered {registered} (candidate; evaluate and promote it)")
        comparison = None
        if registered and run.heldout_envs:
            with progress(f"held-out evaluation ({options.heldout_k} rollouts each)") as steps:
                comparison = run.heldout(
                    registered, on_env=lambda env: steps.advance(f"scored {env.instance_id}")
                )
    except TrainingRunError as exc:
        raise click.ClickException(str(exc)) from None
    if comparison is not None and not as_json:
        _print_heldout(comparison)
    if as_json:
        echo_json(_run_json(result, registered, comparison))


def _train_with_progress(
    train: Callable[..., RunResult], steps_left: int, ranks: Ranks
) -> RunResult:
    """``train(on_step)`` under a progress bar on rank 0 (the others train silently)."""
    if not ranks.is_main:
        return train()
    with click.progressbar(length=steps_left, label="training") as bar:

        def on_step(record: StepRecord) -> None:
            bar.update(1)
            bar.label = (
                f"step {record.step + 1} reward {record.mean_reward:.2f} "
                f"pass {record.pass_rate:.0%}"
                + (f" failed groups {record.failed_groups}" if record.failed_groups else "")
                + (f" TAMPER {record.tamper_rate:.0%}" if record.tampered else "")
            )

        return train(on_step)


def _pulled_base(settings: WorkerSettings) -> str:
    """The configured base model where `ribbit model pull` put it (the trainer, rollout
    workers and evaluation all run with the hub offline and the models volume mounted)."""
    from worker.model_choice import ModelNotReady, local_weights

    in_process = settings.model.model_copy(update={"policy": "transformers"})
    try:
        return local_weights(in_process, settings.effective_weights_dir).model
    except ModelNotReady as exc:
        raise click.ClickException(f"{exc.problem} Run: {exc.fix.removeprefix('run ')}") from None


def _run_line(result: RunResult) -> str:
    rewards = result.mean_rewards
    world = f" on {result.world_size} ranks" if result.world_size > 1 else ""
    return (
        f"run {result.run_id}: {len(rewards)} steps{world}, mean reward "
        f"{rewards[0] if rewards else 0:.3f} -> {rewards[-1] if rewards else 0:.3f}; "
        f"checkpoint {result.checkpoint}"
    )


def _run_figures(steps: list[StepRecord], out: Path) -> str:
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
        + _tamper_figure(steps, out)
    )


def _tamper_figure(steps: list[StepRecord], out: Path) -> str:
    """Forged runs are the reward-hacking signal: said whenever there were any."""
    tampered = sum(r.tampered for r in steps)
    if not tampered:
        return ""
    worst = max(steps, key=lambda r: (r.tamper_rate, r.step))
    return (
        f"; TAMPER: {tampered} episode(s) forged their test run (worst step "
        f"{worst.step + 1}: {worst.tamper_rate:.0%}); see {out / TAMPERED_FILE}"
    )


def _print_heldout(comparison: HeldoutComparison) -> None:
    click.echo(
        f"held-out pass@1 on {comparison.after.score.envs} env(s), {comparison.k} rollout(s) each:"
    )
    for label, score in (("before", comparison.before), ("after", comparison.after)):
        note = "" if score.measured else " (recorded)"
        click.echo(f"  {label}\t{score.model}\t{score.score.text()}{note}")


def _run_json(
    result: RunResult, registered: str | None, comparison: HeldoutComparison | None
) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "steps": len(result.steps),
        "world_size": result.world_size,
        "mean_rewards": result.mean_rewards,
        "tamper_rates": result.tamper_rates,
        "tampered": str(result.output_dir / TAMPERED_FILE),
        "checkpoint": None if result.checkpoint is None else str(result.checkpoint),
        "metrics": str(result.metrics),
        "registered": registered,
        "heldout": None if comparison is None else comparison.to_json(),
    }
