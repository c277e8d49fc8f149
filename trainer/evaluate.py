"""Score a model version on held-out environments, and calibrate environments.

A version's score is its pass@1 over the held-out environments, from k rollouts
each with the real reward (:mod:`trainer.calibrate`), stored with its 95% interval
(:mod:`trainer.passk`); the registry promotes on the score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from bot.store.db import Database
from trainer.calibrate import CalibrationReport, calibrate
from trainer.checkouts import CheckedOut
from trainer.envs.schema import Environment
from trainer.passk import PassAt1
from trainer.promotion import JUDGE_VERSION
from trainer.registry import RegistryError, promoted_model
from trainer.rl.learner import load_base_model
from trainer.rl.rollout import graded_reward
from trainer.store import ModelVersion, ScoredEnv, TrainerStore
from worker.agent import TransformersPolicy
from worker.agent.episode import SandboxRecipe
from worker.settings import AgentSettings


def version_policy(
    base_model: str, adapter_path: str | None, limits: AgentSettings
) -> TransformersPolicy:
    """The base weights, with the version's LoRA adapter on top when it has one."""
    model, tokenizer = load_base_model(base_model)
    name = base_model
    if adapter_path:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_path)  # type: ignore[assignment]
        name = f"{base_model}+{Path(adapter_path).name}"
    model.eval()
    return TransformersPolicy.from_model(model, tokenizer, model_name=name, defaults=limits)


@dataclass(frozen=True)
class Exam:
    """What a held-out score is taken on: the checked-out environments, ``k`` rollouts
    each in these sandboxes with these agent limits. Every model a promotion compares
    sits the same exam (:func:`before_and_after`)."""

    envs: Sequence[CheckedOut]
    sandbox_factory: SandboxRecipe
    limits: AgentSettings
    k: int = 1
    on_env: Callable[[Environment], None] | None = None  # progress, as each env is scored


def score_model(base_model: str, adapter_path: str | None, exam: Exam) -> CalibrationReport:
    """``exam.k`` rollouts per environment by the base weights (with the adapter when
    given), each scored by the real reward: what a version's score and the base's both
    rest on."""
    policy = version_policy(base_model, adapter_path, exam.limits)
    reward = graded_reward(exam.sandbox_factory)
    return calibrate(
        exam.envs, policy, exam.limits, exam.sandbox_factory, reward, k=exam.k, on_env=exam.on_env
    )


def _require_envs(envs: Sequence[CheckedOut]) -> None:
    # Before the model loads: over no environments pass@1 has no value (trainer/passk.py),
    # and the load would be spent for an error.
    if not envs:
        raise RegistryError("no environments to evaluate on")


def evaluate_version(db: Database, name: str, exam: Exam) -> CalibrationReport:
    """Run the version on ``exam`` and store its held-out pass@1 and interval."""
    _require_envs(exam.envs)
    version = TrainerStore(db).version(name)
    if version is None:
        raise RegistryError(f"no version {name!r}")
    report = score_model(version.base_model, version.adapter_path, exam)
    record_heldout(db, name, report.pass_at_1, exam.k)
    record_results(db, name, version.line, [e for e, _ in exam.envs], report)
    return report


def record_results(
    db: Database,
    subject: str,
    line: str,
    envs: Sequence[Environment],
    report: CalibrationReport,
) -> None:
    """Store each environment's result (with the environment's content hash and the
    judge), what the paired promotion test compares."""
    scored = [
        ScoredEnv(e.instance_id, e.content_hash(), c.k, c.solved, JUDGE_VERSION)
        for e in envs
        if (c := report.calibrations.get(e.instance_id)) is not None
    ]
    TrainerStore(db).record_results(subject, line, scored, judge=JUDGE_VERSION)


def evaluate_base(db: Database, line: str, base_model: str, exam: Exam) -> CalibrationReport:
    """Score the base model on ``line``'s held-out ``exam`` and store its results: a
    line's first version is compared with them."""
    from trainer.registry import base_subject

    _require_envs(exam.envs)
    report = score_model(base_model, None, exam)
    record_results(db, base_subject(base_model), line, [e for e, _ in exam.envs], report)
    return report


def record_heldout(db: Database, name: str, score: PassAt1, k: int) -> None:
    """Store ``score`` as version ``name``'s held-out result."""
    recorded = TrainerStore(db).record_heldout(
        name, rate=score.rate, envs=score.envs, low=score.low, high=score.high, k=k
    )
    if not recorded:
        raise RegistryError(f"no version {name!r}")


@dataclass(frozen=True)
class HeldoutScore:
    """One model's held-out pass@1: a version's (by name) or the base it started from."""

    model: str
    score: PassAt1
    k: int
    measured: bool  # scored now (False: the registry's record, from an earlier evaluate)

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "pass_at_1": self.score.rate,
            "ci_low": self.score.low,
            "ci_high": self.score.high,
            "envs": self.score.envs,
            "k": self.k,
            "measured": self.measured,
        }


@dataclass(frozen=True)
class HeldoutEvaluation:
    """What ``ribbit model evaluate`` and ``evaluate-base`` found: one model's held-out
    pass@1 on a line and each environment's result behind it, as a sentence or as JSON."""

    base_model: str  # the base weights: the version's (its registry row's), or the base scored
    version: str | None  # the version scored; None when the base model itself was
    line: str
    k: int
    report: CalibrationReport

    def text(self) -> str:
        score = self.report.pass_at_1
        rate = f"held-out pass rate {score.rate:.1%} on {score.envs} env(s)"
        interval = f"95% CI {score.low:.1%}-{score.high:.1%}"
        if self.version is None:
            return f"base {self.base_model} on line {self.line}: {rate}, {interval} (k={self.k})"
        return f"{self.version}: {rate}, {interval} (pass@1 from {self.k} rollout(s) each)"

    def to_json(self) -> dict[str, object]:
        score = self.report.pass_at_1
        return {
            # base_model as `model list --json` gives it; version null: the base was scored.
            "version": self.version,
            "base_model": self.base_model,
            "line": self.line,
            "k": self.k,
            "envs": score.envs,
            "pass_at_1": score.rate,
            "ci_low": score.low,
            "ci_high": score.high,
            "results": [
                {"instance_id": instance_id, "k": c.k, "solved": c.solved}
                for instance_id, c in self.report.calibrations.items()
            ],
        }


def _recorded(version: ModelVersion) -> HeldoutScore | None:
    if (
        version.heldout_pass_rate is None
        or version.heldout_ci_low is None
        or version.heldout_ci_high is None
        or not version.heldout_envs
    ):
        return None
    score = PassAt1(
        rate=version.heldout_pass_rate,
        low=version.heldout_ci_low,
        high=version.heldout_ci_high,
        envs=version.heldout_envs,
        exact=Fraction(version.heldout_pass_rate),
    )
    return HeldoutScore(version.name, score, version.heldout_k or 1, measured=False)


def _same_exam(db: Database, version: ModelVersion, exam: Exam) -> bool:
    """Whether ``version``'s stored results are on exactly ``exam``'s environments (ids
    and content), with its ``k`` rollouts each, by this judge."""
    stored = {
        (r.instance_id, r.content_hash, r.k, r.judge)
        for r in TrainerStore(db).results(version.name, version.line)
    }
    return stored == {
        (e.instance_id, e.content_hash(), exam.k, JUDGE_VERSION) for e, _ in exam.envs
    }


def before_and_after(
    db: Database, candidate: str, start_model: str, exam: Exam
) -> tuple[HeldoutScore, HeldoutScore]:
    """The held-out score of what ``candidate`` would replace, and ``candidate``'s own
    (recorded with it), in the same grading. *Before* is the line's promoted version:
    its recorded score where it has one on as many environments with the same k, else
    scored now (and recorded); with nothing
    promoted, the base the run started from, scored now (there is no version to record
    it with)."""
    row = TrainerStore(db).version(candidate)
    if row is None:
        raise RegistryError(f"no version {candidate!r}")
    line = row.line
    current = promoted_model(db, line)  # its own session: sqlite has one writer at a time
    before: HeldoutScore | None = None
    if current is not None:
        before = _recorded(current)
        # A record from another held-out set, k or judge is not comparable: re-score.
        if before is None or not _same_exam(db, current, exam):
            report = evaluate_version(db, current.name, exam)
            before = HeldoutScore(current.name, report.pass_at_1, exam.k, measured=True)
    else:
        report = evaluate_base(db, line, start_model, exam)
        before = HeldoutScore(start_model, report.pass_at_1, exam.k, measured=True)
    report = evaluate_version(db, candidate, exam)
    return before, HeldoutScore(candidate, report.pass_at_1, exam.k, measured=True)
