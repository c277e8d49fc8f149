"""The GPU benchmark only runs on a lent GPU for a few minutes, so its script must not rot
between leases: its CPU smoke path runs every measurement on a tiny model of the family."""

from __future__ import annotations

import pytest

from tests.benchmarks import bench_trainer_gpu as bench


@pytest.mark.slow  # a model built and decoded on CPU: ~15 s on a quiet 2-core machine
def test_smoke_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--smoke", "--lengths", "64", "--group", "2", "--streams", "1"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "learner step, 2 x 64 tokens" in out
    assert "decode, 1 stream(s)" in out
    assert "in-process decode, fast, 1 stream" in out and "in-process decode, plain" in out
    assert "8 of 8 greedy tokens identical" in out  # fp32 on CPU: the static cache agrees
    assert "generator vs learner log-probs" in out
    assert "0.00% of tokens over the importance cap (2)" in out  # fp32 on both sides


@pytest.mark.slow
def test_parts_run_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--smoke", "--parts", "learner", "--lengths", "64", "--group", "2"]) == 0
    out = capsys.readouterr().out
    assert "learner step" in out
    assert "decode," not in out and "log-probs" not in out


def test_unknown_part_is_refused() -> None:
    with pytest.raises(SystemExit) as err:
        bench.main(["--smoke", "--parts", "learner,decoder"])
    assert err.value.code == 2


def test_fla_backward_is_not_refused_without_a_gpu() -> None:
    # The script's two-process split (scripts/gpu-bench.sh) only happens on a Hopper GPU.
    assert bench.fla_backward_refused() is False
