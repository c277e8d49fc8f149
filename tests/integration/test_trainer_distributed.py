"""The learner and the training loop sharded (FSDP2) under real ``torchrun`` processes
(two ranks, gloo on CPU), checked against one process.

- Exactness, launched as two nodes (two torchrun agents meeting at a c10d rendezvous
  on localhost, one rank each): one learner step on a fixed batch split unevenly over
  the ranks (one rank may hold nothing) gives the gradients and weights one process
  gets on the whole batch; the parameters really are sharded; the sharded checkpoint
  each case saves resumes in one process and takes the step one process would take.
- The command: ``torchrun -m bot train`` on a stored environment with the real
  sandbox and reward records one run and one model version, from rank 0.
- End to end: the training loop on the toy task (trainer/rl/toy.py) with one group
  per rank per step raises the expected reward; rank 0 alone writes checkpoints and
  gets ``on_step``; a resume from a checkpoint replays the same rollouts on each rank.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.testing import assert_close

from tests.fakes import make_git_repo
from tests.integration.distributed.cases import ATOL, CASES, EXACTNESS_DTYPE, RTOL
from tests.plugins.trainer import PYTEST, FixRepo, calc_environment, in_default_line
from tests.support import require_service
from trainer.distributed import Ranks
from trainer.envs.folders import EnvironmentFolders
from trainer.rl.learner import Learner, load_base_model

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _env() -> dict[str, str]:
    """Read at launch: tests set variables (RIBBIT_DATA_DIR) with monkeypatch."""
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))


def torchrun(module: str, *args: str | Path, nproc: int = 2) -> str:
    """``python -m <module> args`` in ``nproc`` processes launched by torchrun; the
    processes' stdout."""
    proc = subprocess.run(
        [
            *TORCHRUN,
            "--standalone",  # rendezvous on a free local port
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(nproc),
            "-m",
            module,
            *map(str, args),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def torchrun_two_nodes(module: str, *args: str | Path) -> None:
    """``python -m <module> args`` launched as on two machines: two torchrun agents
    (node ranks 0 and 1, one process each) that find each other through a c10d
    rendezvous, exactly as the README's multi-node command does, here on localhost."""
    endpoint = f"127.0.0.1:{_free_port()}"
    agents = [
        subprocess.Popen(
            [
                *TORCHRUN,
                "--nnodes",
                "2",
                "--node-rank",
                str(node),
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                "ribbit-two-nodes",
                "-m",
                module,
                *map(str, args),
            ],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for node in (0, 1)
    ]
    outputs = [agent.communicate(timeout=240)[0] for agent in agents]
    for agent, output in zip(agents, outputs, strict=True):
        assert agent.returncode == 0, f"torchrun failed:\n{output}"


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = torch.load(path, weights_only=False)
    return loaded


def _assert_same(
    a: dict[str, torch.Tensor],
    b: dict[str, torch.Tensor],
    *,
    atol: float | None = None,
    rtol: float | None = None,
) -> None:
    """Equal bit for bit, or close within ``atol``/``rtol`` when given."""
    assert a.keys() == b.keys()
    for key in a:
        if atol is None:
            assert torch.equal(a[key], b[key]), key
        else:
            assert_close(a[key], b[key], atol=atol, rtol=rtol)


def test_one_step_on_uneven_ranks_equals_one_process_on_the_whole_batch(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    torchrun_two_nodes("tests.integration.distributed.learner_step", tiny_model_dir, tmp_path)
    for case in CASES:
        ranks = [_load(tmp_path / f"{case.name}-rank{r}.pt") for r in (0, 1)]
        # One model, sharded: both ranks gather the same whole weights and gradients.
        _assert_same(ranks[0]["state"], ranks[1]["state"])
        _assert_same(ranks[0]["grads"], ranks[1]["grads"])
        assert ranks[0]["stats"] == ranks[1]["stats"]
        # Each rank holds half of every trainable parameter (FSDP shards on dim 0).
        for name, shape in ranks[0]["shard_shapes"].items():
            whole = ranks[0]["state"][name].shape
            assert shape is not None and shape[0] == (whole[0] + 1) // 2, name

        settings = case.settings(tiny_model_dir, tmp_path / "single")
        torch.manual_seed(settings.seed)
        model, tokenizer = load_base_model(str(tiny_model_dir), dtype=EXACTNESS_DTYPE)
        single = Learner(model, tokenizer, settings, ranks=Ranks())
        stats = single.step_or_skip(case.samples)
        assert ranks[0]["step_count"] == single.step_count == 1
        _assert_same(ranks[0]["state"], single.trainable_state(), atol=ATOL, rtol=RTOL)
        if stats is None:  # every rank empty: skipped alike, nothing learnt
            assert ranks[0]["stats"] is None and not ranks[0]["grads"]
            continue
        grads: dict[str, torch.Tensor] = {
            name: p.grad
            for name, p in single.model.named_parameters()
            if p.requires_grad and p.grad is not None
        }
        _assert_same(ranks[0]["grads"], grads, atol=ATOL, rtol=RTOL)
        got = ranks[0]["stats"]
        assert got["tokens"] == stats.tokens == sum(sum(s.loss_mask[1:]) for s in case.samples)
        for key in ("loss", "policy_loss", "kl", "clip_fraction", "grad_norm"):
            assert got[key] == pytest.approx(getattr(stats, key), rel=RTOL, abs=ATOL), key
        assert stats.grad_norm > 0
        if not case.resume:
            continue

        # The sharded checkpoint, resumed in one process, holds the same weights and
        # optimizer state: the next step equals the single process's second step.
        torch.manual_seed(settings.seed + 1)  # LoRA's init, overwritten by the load
        model, tokenizer = load_base_model(str(tiny_model_dir), dtype=EXACTNESS_DTYPE)
        resumed = Learner(model, tokenizer, settings, ranks=Ranks())
        resumed.load(tmp_path / case.name / "step-1")
        assert resumed.step_count == 1
        _assert_same(resumed.trainable_state(), ranks[0]["state"])
        single.step(case.samples)
        resumed.step(case.samples)
        _assert_same(resumed.trainable_state(), single.trainable_state(), atol=ATOL, rtol=RTOL)


def test_training_loop_on_two_ranks_raises_the_reward(
    two_choice_model_dir: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "toy"
    base = make_git_repo(repo, {"README.md": "toy\n"})
    out = tmp_path / "out"
    out.mkdir()
    torchrun("tests.integration.distributed.train_toy", two_choice_model_dir, repo, base, out)
    r0, r1 = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))

    # Every rank knows the whole step (both groups, rank 0's first); rank 0 alone logs.
    assert r0["rewards"] == r1["rewards"] and r0["losses"] == r1["losses"]
    assert all(len(rewards) == 2 * 4 for rewards in r0["rewards"])
    assert (r0["on_step_calls"], r1["on_step_calls"]) == (6, 0)
    # The ranks sampled their own rollouts (the per-rank RNG), not copies of each other.
    assert any(rw[:4] != rw[4:] for rw in r0["rewards"])

    # Learning happened, as in the single-process test (tests/unit/trainer/test_training.py).
    assert r0["expected_reward_before"] < 0.4
    assert r0["expected_reward_after"] > r0["expected_reward_before"] + 0.3
    means = r0["mean_rewards"]
    assert sum(means[-2:]) / 2 > sum(means[:2]) / 2

    # Checkpoints: sharded (each rank wrote its own shards); rank 0 alone wrote the RNG
    # states and the exported adapter; both ranks got the same paths back.
    run = out / "run"
    assert r0["checkpoints"] == r1["checkpoints"] == [str(run / f"step-{n}") for n in (2, 4, 6)]
    assert not any(p.endswith("rng.pt") for p in r1["torch_saves"])
    assert any(p.endswith("step-2/rng.pt") for p in r0["torch_saves"])
    shards = sorted(p.name for p in (run / "step-6" / "checkpoint").glob("*.distcp"))
    assert len(shards) == 2, shards
    assert (run / "step-6" / "adapter" / "adapter_model.safetensors").is_file()
    rng = torch.load(run / "step-6" / "rng.pt", weights_only=False)
    assert len(rng["ranks"]) == 2

    # Resuming from the sharded step-4 checkpoint on both ranks replays steps 5-6 exactly
    # (weights, optimizer shards, and each rank's own RNG state restored).
    assert r0["resumed_rewards"] == r0["rewards"][4:] == r1["resumed_rewards"]
    for again, first in zip(r0["resumed_losses"], r0["losses"][4:], strict=True):
        assert again == pytest.approx(first, abs=1e-6)

    finals = [_load(out / f"rank{r}-final.pt") for r in (0, 1)]
    _assert_same(finals[0]["final"], finals[1]["final"])
    _assert_same(finals[0]["resumed"], finals[1]["resumed"])
    _assert_same(finals[0]["resumed"], finals[0]["final"], atol=1e-6, rtol=1e-5)


def test_train_command_under_torchrun_records_one_run_from_rank_zero(
    tiny_model_dir: Path,
    fix_with_new_test: FixRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A random model never earns the reward: every group is filtered on both ranks,
    so the step is skipped on both alike, and the run must still finish and record."""
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    data = tmp_path / "data"
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    env = calc_environment(
        fix_with_new_test, test_command=PYTEST.replace(sys.executable, "python3")
    )
    env = in_default_line(env, f"sqlite:///{data / 'ribbit.db'}")
    EnvironmentFolders(data / "trainer").add(env, fix_with_new_test.path)
    output = torchrun(
        "bot",
        "train",
        "--model",
        tiny_model_dir,
        "--steps",
        "1",
        "--group-size",
        "2",
        "--register",
        "cand1",
        "--max-turns",
        "1",
        "--max-new-tokens",
        "16",
    )
    assert output.count("run 1: 1 steps on 2 ranks, mean reward 0.000 -> 0.000") == 1
    assert output.count("registered cand1") == 1
    # One run folder (rank 0 named it from the clock and told the others).
    (run_dir,) = (data / "trainer" / "runs").iterdir()
    assert (run_dir / "step-1" / "adapter").is_dir()

    from bot.store.db import Database
    from trainer.registry import versions
    from trainer.store import TrainingRun

    db = Database(f"sqlite:///{data / 'ribbit.db'}")
    with db.session() as s:
        runs = s.query(TrainingRun).all()
        assert [(r.state, r.steps_done, r.output_dir) for r in runs] == [
            ("finished", 1, str(run_dir))
        ]
    assert [(v.name, v.state) for v in versions(db)] == [("cand1", "candidate")]
