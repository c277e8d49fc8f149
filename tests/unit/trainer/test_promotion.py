"""Promotion means better: the paired exact test on the same held-out exam (#33)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from bot.store.db import Database
from trainer.promotion import JUDGE_VERSION, EnvResult, sign_test, sign_test_p
from trainer.registry import (
    RegistryError,
    promote,
    promoted_model,
    promotion_check,
    register,
)
from trainer.store import ScoredEnv, TrainerStore


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def _version(db: Database, name: str, line: str = "default", k: int = 1) -> None:
    register(db, name, base_model="base", adapter_path=None, line=line)
    TrainerStore(db).record_heldout(name, rate=0.5, envs=1, low=0.0, high=1.0, k=k)


def _score(
    db: Database,
    subject: str,
    solved: list[int],
    *,
    k: int = 1,
    line: str = "default",
    prefix: str = "env",
    judge: str = JUDGE_VERSION,
    hashes: str = "h",
) -> None:
    TrainerStore(db).record_results(
        subject,
        line,
        [ScoredEnv(f"{prefix}-{i}", f"{hashes}-{i}", k, c, judge) for i, c in enumerate(solved)],
        judge=judge,
    )


def test_sign_test_p_value_is_exact_for_a_hand_computed_case() -> None:
    # 8 wins, 1 loss: P(X >= 8 | n=9, 1/2) = (C(9,8) + C(9,9)) / 2^9 = 10/512.
    assert sign_test_p(8, 1) == Fraction(5, 256)
    assert sign_test_p(0, 0) == 1  # no discordant pair: no evidence
    assert sign_test_p(5, 0) == Fraction(1, 32)
    assert sign_test_p(3, 3) == Fraction(42, 64)


def test_ties_are_dropped_and_never_better() -> None:
    a = {f"e{i}": EnvResult(f"e{i}", None, 1, i % 2, "j") for i in range(40)}
    b = {f"e{i}": EnvResult(f"e{i}", None, 1, (i + 1) % 2, "j") for i in range(40)}
    test = sign_test(a, b)
    assert (test.wins, test.losses, test.ties) == (20, 20, 0)
    assert not test.better
    same = sign_test(a, a)
    assert (same.wins, same.losses, same.ties, same.p_value) == (0, 0, 40, 1)
    assert not same.better


def test_a_tie_is_not_promoted(db: Database) -> None:
    _version(db, "v1")
    _version(db, "v2")
    _score(db, "base:base", [0] * 40)
    _score(db, "v1", [1] * 20 + [0] * 20)
    promote(db, "v1")
    # 50% vs 50% on the same 40 environments, even with different ones solved.
    _score(db, "v2", [0] * 20 + [1] * 20)
    with pytest.raises(RegistryError, match=r"v2 is not better than v1: 20 win\(s\), 20 loss"):
        promote(db, "v2")
    assert promoted_model(db).name == "v1"  # type: ignore[union-attr]


def test_a_different_heldout_set_is_refused_until_rescored(db: Database) -> None:
    _version(db, "v1", k=4)
    _version(db, "v2")
    _score(db, "base:base", [0] * 20, k=4)
    _score(db, "v1", [2] * 20, k=4)
    promote(db, "v1", force=True)
    # 100% on one environment at k=1 must not replace 50% on 20 at k=4.
    _score(db, "v2", [1], prefix="other")
    with pytest.raises(RegistryError, match="different held-out sets") as refused:
        promote(db, "v2")
    assert "ribbit model evaluate v1 --k 1" in str(refused.value)
    assert "ribbit model evaluate v2 --k 1" in str(refused.value)
    # Same environments, but v1 was scored at k=4: still refused, naming k.
    _score(db, "v2", [1] * 20, k=1)
    with pytest.raises(RegistryError, match=r"different k \(1 vs 4\)"):
        promote(db, "v2")
    # Same ids, but an environment changed since v1 was scored.
    _score(db, "v2", [4] * 20, k=4, hashes="changed")
    with pytest.raises(RegistryError, match="environments changed between scorings"):
        promote(db, "v2")
    # Another judge.
    _score(db, "v2", [4] * 20, k=4, judge="reward-0")
    with pytest.raises(RegistryError, match="different judges"):
        promote(db, "v2")
    # Re-scored on the same exam, and better on enough environments... but 20 < 30.
    _score(db, "v2", [4] * 20, k=4)
    with pytest.raises(RegistryError, match="below the minimum of 30"):
        promote(db, "v2")


def test_a_first_version_is_compared_with_the_base(db: Database) -> None:
    _version(db, "v1")
    _score(db, "v1", [0] * 40)
    with pytest.raises(RegistryError, match=r"base base.*no per-environment results") as refused:
        promote(db, "v1")
    assert "ribbit model evaluate-base --line default --model base --k 1" in str(refused.value)
    _score(db, "base:base", [1] * 10 + [0] * 30)
    with pytest.raises(RegistryError, match=r"v1 is not better than base base: 0 win\(s\), 10 "):
        promote(db, "v1")
    _score(db, "v1", [1] * 10 + [1] * 8 + [0] * 22)
    check = promotion_check(db, "v1")
    assert "8 win(s), 0 loss(es)" in check.evidence and check.skipped == ()
    promote(db, "v1")
    assert promoted_model(db).name == "v1"  # type: ignore[union-attr]


def test_the_base_comparison_is_per_line(db: Database) -> None:
    _version(db, "a1", line="team-a")
    _score(db, "a1", [1] * 40, line="team-a")
    # A base score on another line's held-out set says nothing about team-a's.
    _score(db, "base:base", [0] * 40, line="team-b")
    with pytest.raises(RegistryError, match="no per-environment results"):
        promote(db, "a1")
    _score(db, "base:base", [0] * 40, line="team-a")
    promote(db, "a1")


def test_force_says_what_it_skipped(db: Database) -> None:
    _version(db, "v1")
    _score(db, "base:base", [0] * 5)
    _score(db, "v1", [0] * 5)
    check = promotion_check(db, "v1", force=True)
    assert any("below the minimum of 30" in s for s in check.skipped)
    assert any(s.startswith("not better: 0 win(s)") for s in check.skipped)
    _version(db, "v2")
    check = promotion_check(db, "v2", force=True)
    assert check.skipped and "no per-environment results" in check.skipped[0]


def test_a_small_clear_win_still_needs_force(db: Database) -> None:
    _version(db, "v1")
    _score(db, "base:base", [0] * 10)
    _score(db, "v1", [1] * 10)
    with pytest.raises(RegistryError, match="10 environment"):
        promote(db, "v1")
    promote(db, "v1", force=True)


def test_versions_scored_before_migration_0015_must_be_rescored(tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import text

    from bot.store.db import alembic_config

    database = Database(f"sqlite:///{tmp_path / 'old.db'}")
    cfg = alembic_config(database.engine)
    command.upgrade(cfg, "0014")
    with database.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO model_versions (name, line, base_model, heldout_pass_rate, "
                "heldout_envs, heldout_k, state, created_at) VALUES "
                "('old1', 'default', 'base', 0.9, 40, 1, 'candidate', '2026-01-01')"
            )
        )
    command.upgrade(cfg, "head")
    (old,) = TrainerStore(database).versions()
    assert (old.heldout_judge, old.parent_version, old.revoked_reason) == (None, None, None)
    assert TrainerStore(database).training_envs("old1") == []
    with pytest.raises(RegistryError, match="old1: no per-environment results, re-score"):
        promote(database, "old1")
    command.downgrade(cfg, "0014")  # and back, for an upgrade that has to be undone
    database.dispose()
