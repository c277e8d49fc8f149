"""Fixtures for the trainer: small real git repositories with real bug fixes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import commit_files, git, local_sandboxes, make_git_repo

# The host interpreter: LocalDirSandbox runs commands on the host, where "python"
# may not be the venv's.
PYTEST = f"{sys.executable} -m pytest -q"

CALC_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_ADD = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@dataclass(frozen=True)
class FixRepo:
    path: Path
    base: str
    fix: str


# Host-copy sandboxes, set up by the repository's setup command alone.
sandbox_factory = local_sandboxes()


@pytest.fixture
def fix_with_new_test(tmp_path: Path) -> FixRepo:
    """add() subtracts; the fix corrects it and adds tests/test_add.py."""
    repo = tmp_path / "calc"
    base = make_git_repo(repo, {"calc.py": CALC_BUGGY, "tests/test_mul.py": TEST_MUL})
    fix = commit_files(repo, {"calc.py": CALC_FIXED, "tests/test_add.py": TEST_ADD}, "fix add")
    return FixRepo(repo, base, fix)


CACHETOOLS = Path(__file__).resolve().parents[1] / "fixtures" / "cachetools"


def cachetools_fix_repo(repo: Path) -> tuple[Path, str, str]:
    """tkem/cachetools before and after its fix c1cb338 (#200), vendored in
    tests/fixtures/cachetools, as a two-commit repository at ``repo``: (repo, base, fix)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "apply", str(CACHETOOLS / "base.patch"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base: parent of c1cb338")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "apply", str(CACHETOOLS / "fix.patch"))
    git(repo, "commit", "-qam", "Fix #200: Handle __missing__ not storing cache items.")
    return repo, base, git(repo, "rev-parse", "HEAD")


def token_id(tokenizer: Any, token: str) -> int:
    """The id of a token given as its vocabulary entry."""
    tid = tokenizer.convert_tokens_to_ids(token)
    assert isinstance(tid, int), f"{token!r} maps to {tid!r}"
    return tid


def build_two_choice_model(source: Path, target: Path, choices: dict[str, float]) -> Path:
    """A copy of the tiny model that, after a newline (the end of every generation
    prompt), says one of ``choices`` (token text -> logit), then ends its turn.

    All layers are zeroed, so the next token depends on the current one only (see
    tests/plugins/models.py ``program_model``); the lm_head is then set by hand.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source)

    def one_token(text: str) -> int:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, f"{text!r} is not one token: {ids}"
        return int(ids[0])

    newline, eos = one_token("\n"), token_id(tokenizer, "<|im_end|>")
    with torch.no_grad():
        for param in model.model.layers.parameters():
            param.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        head.zero_()
        for i, (current, nexts) in enumerate(
            [
                (newline, [(one_token(c), lg) for c, lg in choices.items()]),
                *[(one_token(c), [(eos, 40.0)]) for c in choices],
            ]
        ):
            embed[current] = 0.0
            embed[current, i] = 1.0
            hidden = model.model.norm(embed[current].unsqueeze(0))[0]
            for nxt, logit in nexts:
                head[nxt] += logit * hidden / hidden.norm() ** 2
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="session")
def two_choice_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_two_choice_model(
        tiny_model_dir, tmp_path_factory.mktemp("two-choice"), {"A": 9.0, "B": 10.0}
    )


def calc_environment(
    fix: FixRepo,
    *,
    test_command: str = PYTEST,
    issue: str = "add is wrong",
    test_timeout_s: float = 60,
) -> Any:
    """The environment EnvironmentBuilder makes of ``fix`` (one run per state)."""
    from trainer.envs.builder import BuildSpec, EnvironmentBuilder

    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=test_timeout_s)
    spec = BuildSpec(
        fix.path, fix.base, fix.fix, issue, repo="acme/calc", test_command=test_command
    )
    return builder.build(spec)


def toy_train_settings(model_dir: Path, out: Path, **overrides: object) -> Any:
    """TrainSettings for the toy task on the two-choice model: short rollouts, LoRA on
    the lm_head, a learning rate that moves it within a few steps."""
    from trainer.config import TrainSettings

    values: dict[str, object] = dict(
        model=str(model_dir),
        output_dir=str(out),
        steps=8,
        group_size=4,
        learning_rate=0.05,
        max_new_tokens=16,
        max_turns=1,
        lora_r=8,
        lora_alpha=16,
        save_every=0,
        seed=0,
        lora_target_modules="lm_head",
    )
    values.update(overrides)
    return TrainSettings(**values)  # type: ignore[arg-type]


def seeded_learner(settings: Any) -> Any:
    """A Learner on ``settings.model``, seeded from ``settings.seed``."""
    from trainer.rl.learner import Learner, load_base_model
    from trainer.train import seed_everything

    seed_everything(settings.seed)
    model, tokenizer = load_base_model(settings.model)
    return Learner(model, tokenizer, settings)


def toy_prompt_ids(learner: Any, env: Any) -> list[int]:
    """The token ids of the toy environment's first prompt, as the policy renders it."""
    from trainer.rl.rollout import task_for
    from worker.agent import TOOL_SCHEMAS, TransformersPolicy
    from worker.agent.prompt import initial_messages

    policy = TransformersPolicy.from_model(learner.model, learner.tokenizer)
    text = policy.render(initial_messages(task_for(env)), TOOL_SCHEMAS, enable_thinking=True)
    ids: list[int] = learner.tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def in_default_line(env: Any, database_url: str) -> Any:
    """``env`` as a public GitHub repository's, recorded so in the database at
    ``database_url``: the default line trains on it (an environment with no forge trains
    no line, and an unrecorded repository counts as private)."""
    from bot.forges.base import RepoRef
    from bot.model_lines import set_visibility
    from bot.store.db import Database

    db = Database(database_url)
    db.migrate()
    set_visibility(db, RepoRef("github", env.repo), private=False)
    db.dispose()
    return env.model_copy(
        update={"provenance": env.provenance.model_copy(update={"forge": "github"})}
    )
