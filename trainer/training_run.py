"""One GRPO run as `ribbit train` makes it, without click: choose the environments,
record the run, load the model, train, register the last checkpoint as a candidate
version and score it on held-out environments beside what it would replace.

The command (trainer/cli/training.py) turns its options into a :class:`TrainSettings`
and :class:`RunOptions`, calls these steps in order and prints what they return::

    run = TrainingRun.open(cfg, options, deployment, ranks, db=db)
    with run:                      # checkouts; the run's row marked failed on an error
        steps_left = run.load()
        result = run.train(on_step)
    registered = run.register(result)
    comparison = run.heldout(registered)

Data parallel (torchrun): every rank calls every step; rank 0 alone holds the database
(one run row, no racing migrations) and gets the result's figures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from bot.model_lines import DEFAULT_LINE, known_lines
from bot.store.db import Database
from trainer.checkouts import SelectionError, checked_out, select, select_for_training
from trainer.config import TrainSettings
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from trainer.store import TrainingRuns
from worker.settings import AgentSettings, WorkerSettings

if TYPE_CHECKING:
    from trainer.distributed import Ranks
    from trainer.evaluate import HeldoutScore
    from trainer.rl.learner import Learner
    from trainer.rl.rollout import RewardFn
    from trainer.rl.sources import RolloutSource
    from trainer.train import StepRecord
    from worker.agent.episode import SandboxRecipe

RolloutMode = Literal["local", "celery", "server"]


class TrainingRunError(Exception):
    """A run that cannot go as asked; the message says why and what to change."""


@dataclass(frozen=True)
class RunOptions:
    """What a run does around the optimisation that :class:`TrainSettings` describes."""

    resume: Path | None = None  # a checkpoint folder (step-N) to continue from
    register: str | None = None  # name the last checkpoint a candidate version
    # local: this process; celery: ribbit.rollout tasks on rollout workers; server:
    # the vLLM/SGLang server of RIBBIT_MODEL__OPENAI_BASE_URL.
    rollouts: RolloutMode = "local"
    in_flight: int = 16  # server rollouts: episodes running at once
    line: str = DEFAULT_LINE  # the model line trained (and registered into)
    heldout: str | None = None  # environments the registered version is scored on
    heldout_k: int = 1  # rollouts per held-out environment


@dataclass(frozen=True)
class RunResult:
    """What a run did; on ranks other than 0, ``run_id`` is None."""

    run_id: int | None
    steps: list[StepRecord]
    steps_done: int  # the learner's step count, resumed steps included
    checkpoint: Path | None  # the last one saved
    output_dir: Path
    world_size: int

    @property
    def mean_rewards(self) -> list[float]:
        return [s.mean_reward for s in self.steps]

    @property
    def tamper_rates(self) -> list[float]:
        """Per step, the share of episodes that forged their test run (trainer/rl/tamper.py)."""
        return [s.tamper_rate for s in self.steps]

    @property
    def metrics(self) -> Path:
        from trainer.train import METRICS_FILE

        return self.output_dir / METRICS_FILE


@dataclass(frozen=True)
class HeldoutComparison:
    """The registered version's held-out pass@1 beside what it would replace."""

    before: HeldoutScore
    after: HeldoutScore
    k: int

    def to_json(self) -> dict[str, object]:
        return {"before": self.before.to_json(), "after": self.after.to_json()}


class TrainingRun:
    """One run: made by :meth:`open`, then :meth:`load` and :meth:`train` inside
    ``with run:``, then :meth:`register` and :meth:`heldout`."""

    def __init__(
        self,
        cfg: TrainSettings,
        options: RunOptions,
        deployment: WorkerSettings,
        ranks: Ranks,
        *,
        chosen: list[Environment],
        heldout_envs: list[Environment],
        sandbox: SandboxRecipe,
        reward: RewardFn,
        db: Database | None,
        run_id: int | None,
    ) -> None:
        self.cfg, self.options, self.deployment, self.ranks = cfg, options, deployment, ranks
        self.chosen, self.heldout_envs = chosen, heldout_envs
        self.sandbox, self.reward = sandbox, reward
        self.db, self.run_id = db, run_id
        self.env_store = EnvironmentFolders(Path(cfg.store_dir))
        self._stack = ExitStack()
        self._pairs: list[tuple[Environment, Path]] | None = None
        self._learner: Learner | None = None

    @classmethod
    def open(
        cls,
        cfg: TrainSettings,
        options: RunOptions,
        deployment: WorkerSettings,
        ranks: Ranks,
        *,
        db: Database | None,
        sandbox: SandboxRecipe | None = None,
        reward: RewardFn | None = None,
    ) -> TrainingRun:
        """The run, its environments chosen and checked, recorded as running. ``db`` is
        rank 0's database, migrated; None on the other ranks, which never touch it.
        ``sandbox`` and ``reward`` default to the deployment's sandboxes and the real
        reward (tests and gates)."""
        env_store = EnvironmentFolders(Path(cfg.store_dir))
        try:
            selected = select_for_training(env_store, cfg.envs)
            if options.heldout is not None and not options.register:
                raise TrainingRunError("--heldout scores the registered version: give --register")
            heldout_envs = select(env_store, options.heldout) if options.heldout else []
        except SelectionError as exc:
            raise TrainingRunError(str(exc)) from None
        if options.heldout is not None and not heldout_envs:
            raise TrainingRunError(f"no environments match --heldout {options.heldout!r}")
        lines = known_lines(deployment.training)
        if options.line not in lines:
            raise TrainingRunError(f"no model line {options.line!r}; lines: {', '.join(lines)}")
        chosen, heldout_envs = _line_choice(db, deployment, options, ranks, selected, heldout_envs)
        if not chosen:
            raise TrainingRunError(f"no environments of line {options.line!r} match {cfg.envs!r}")
        if options.heldout is not None and not heldout_envs:
            raise TrainingRunError(
                f"no held-out environments of line {options.line!r} match --heldout "
                f"{options.heldout!r}; `ribbit envs split --line {options.line}` holds some out"
            )
        if sandbox is None:
            from worker.agent.episode import SandboxRecipe

            sandbox = SandboxRecipe.production(deployment.sandbox)
        if reward is None:
            from trainer.rl.rollout import graded_reward

            reward = graded_reward(sandbox)
        run_id = None
        if db is not None:
            run_id = TrainingRuns(db).start(
                cfg.model, Path(cfg.output_dir), dataclasses.asdict(cfg)
            )
        return cls(
            cfg,
            options,
            deployment,
            ranks,
            chosen=chosen,
            heldout_envs=heldout_envs,
            sandbox=sandbox,
            reward=reward,
            db=db,
            run_id=run_id,
        )

    def __enter__(self) -> TrainingRun:
        try:
            self._pairs = self._stack.enter_context(
                checked_out(self.env_store, self.chosen, "train")
            )
        except Exception:
            self._failed()
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if isinstance(exc, Exception):
                self._failed()
        finally:
            self._stack.close()
            self._pairs = None

    def load(self) -> int:
        """The base model and the learner (resumed where asked); the steps still to take."""
        import torch

        from trainer.rl.learner import Learner, load_base_model
        from trainer.train import seed_everything

        seed_everything(self.cfg.seed)
        # A sharded full fine-tune keeps fp32 master weights (1/N of them per rank) and
        # computes in bf16 through FSDP's mixed-precision policy; otherwise the default.
        sharded_full = self.cfg.finetune == "full" and self.ranks.distributed
        model, tokenizer = load_base_model(
            self.cfg.model, dtype=torch.float32 if sharded_full else None
        )
        self._learner = Learner(model, tokenizer, self.cfg, ranks=self.ranks)
        if self.options.resume is not None:
            self._learner.load(self.options.resume)
        return self.cfg.steps - self._learner.step_count

    def train(self, on_step: Callable[[StepRecord], None] | None = None) -> RunResult:
        """Train to ``cfg.steps``; rank 0 records each step's mean reward and tamper rate
        with the run (and calls ``on_step``) as it goes, and the run as finished at the end."""
        from trainer.train import train

        if self._pairs is None or self._learner is None:
            raise RuntimeError("train() runs inside `with run:`, after load()")
        learner, curve, tamper = self._learner, [], []

        def recorded(record: StepRecord) -> None:  # rank 0 only (train() calls it there)
            curve.append(record.mean_reward)
            tamper.append(record.tamper_rate)
            if self.db is not None and self.run_id is not None:
                TrainingRuns(self.db).progress(self.run_id, record.step + 1, curve, tamper)
            if on_step is not None:
                on_step(record)

        with self._rollout_source() as source:
            summary = train(
                learner,
                self._pairs,
                self.sandbox,
                self.reward,
                self.cfg,
                on_step=recorded,
                rollouts=source,
            )
        if self.db is not None and self.run_id is not None:
            TrainingRuns(self.db).finish(
                self.run_id,
                learner.step_count,
                summary.mean_rewards,
                [s.tamper_rate for s in summary.steps],
            )
        return RunResult(
            self.run_id,
            summary.steps,
            learner.step_count,
            summary.checkpoints[-1] if summary.checkpoints else None,
            Path(self.cfg.output_dir),
            self.ranks.world_size,
        )

    def register(self, result: RunResult) -> str | None:
        """The last checkpoint as a candidate version of the run's line, if asked; its name."""
        from trainer.registry import RegistryError, register
        from worker.weights import base_digest

        name, last = self.options.register, result.checkpoint
        if not name or last is None or self.db is None:
            return None
        # A LoRA run exports an adapter over the base; a full fine-tune, a whole model.
        adapter, full = last / "adapter", last / "model"
        base = str(full) if full.is_dir() else self.cfg.model
        try:
            register(
                self.db,
                name,
                base_model=base,
                adapter_path=str(adapter) if adapter.is_dir() else None,
                run_id=self.run_id,
                base_digest=base_digest(base, self.deployment.effective_weights_dir),
                line=self.options.line,
            )
        except RegistryError as exc:
            raise TrainingRunError(f"{exc}; the run's last checkpoint is {last}") from None
        self._record_provenance(name)
        return name

    def _record_provenance(self, name: str) -> None:
        """What the version learned from: the exact environments (with content hashes),
        and the version it continued (a resumed checkpoint registered before), so deleting
        a repository's data finds it and every version descended from it."""
        from trainer.store import TrainedOn, TrainerStore

        assert self.db is not None  # register() checked
        store = TrainerStore(self.db)
        parent = None
        if self.options.resume is not None:
            resumed = str(self.options.resume / "adapter")
            parent = next((v.name for v in store.versions() if v.adapter_path == resumed), None)
        store.record_training_envs(
            name,
            [
                TrainedOn(e.instance_id, e.content_hash(), e.provenance.forge, e.repo)
                for e in self.chosen
            ],
            parent=parent,
        )

    def heldout(
        self, registered: str | None, on_env: Callable[[Environment], None] | None = None
    ) -> HeldoutComparison | None:
        """The registered version scored on the held-out environments beside the line's
        promoted version (or the base the run started from), in `ribbit model evaluate`'s
        grading; None when nothing was registered or no held-out environments were asked."""
        from trainer.evaluate import Exam, before_and_after

        if registered is None or not self.heldout_envs or self.db is None:
            return None
        k = self.options.heldout_k
        limits = AgentSettings(max_turns=self.cfg.max_turns, max_new_tokens=self.cfg.max_new_tokens)
        with checked_out(self.env_store, self.heldout_envs, "heldout") as pairs:
            exam = Exam(pairs, self.sandbox, limits, k, on_env)
            before, after = before_and_after(self.db, registered, self.cfg.model, exam)
        return HeldoutComparison(before, after, k)

    def _failed(self) -> None:
        if self.db is not None and self.run_id is not None:
            TrainingRuns(self.db).fail(self.run_id)

    def _rollout_source(self) -> _Source:
        """Where rollouts come from: None (the learner's own weights, in this process), the
        rollout workers, or the inference servers (closed after: the adapter taken off)."""
        from trainer.train import agent_limits

        limits = agent_limits(self.cfg)
        if self.options.rollouts == "celery":
            from trainer.celery_app import create_rollout_celery
            from trainer.rl.remote import CeleryRollouts

            return _Source(
                CeleryRollouts(
                    create_rollout_celery(self.deployment),
                    store_dir=Path(self.cfg.store_dir),
                    output_dir=Path(self.cfg.output_dir),
                    limits=limits,
                    seed=self.cfg.seed + self.ranks.rank,
                )
            )
        if self.options.rollouts == "server":
            from trainer.rl.served import ServerRollouts

            served = ServerRollouts(
                self.deployment.model,
                limits,
                self.sandbox,
                self.reward,
                output_dir=Path(self.cfg.output_dir),
                in_flight=self.options.in_flight,
            )
            return _Source(served, close=served.close)
        return _Source(None)


def _line_choice(
    db: Database | None,
    deployment: WorkerSettings,
    options: RunOptions,
    ranks: Ranks,
    selected: list[Environment],
    heldout: list[Environment],
) -> tuple[list[Environment], list[Environment]]:
    """The environments the line may train on, and its own held-out ones to score on:
    rank 0 reads the lines; every rank trains on its choice."""
    from trainer.envs.lines import line_environments, line_heldout

    def mine(envs: list[Environment]) -> list[str]:
        if db is None:
            return []
        return [
            e.instance_id for e in line_environments(db, deployment.training, options.line, envs)
        ]

    ids = set(ranks.broadcast_object(mine(selected)))
    scored = (
        {e.instance_id for e in line_heldout(db, deployment.training, options.line, heldout)}
        if db is not None
        else set()
    )
    return [e for e in selected if e.instance_id in ids], [
        e for e in heldout if e.instance_id in scored
    ]


@dataclass
class _Source:
    """A rollout source for the length of a run, and what ends it."""

    source: RolloutSource | None
    close: Callable[[], None] | None = None

    def __enter__(self) -> RolloutSource | None:
        return self.source

    def __exit__(self, *exc: object) -> None:
        if self.close is not None:
            self.close()
