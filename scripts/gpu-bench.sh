#!/usr/bin/env bash
# The GPU benchmark in one command (issue #16 item 7), sized for a short lease on one GPU:
# the learner at the real 4B configuration, decode at 1 and N streams, time to first token,
# the bandwidth ratio, the fast in-process decode (static cache, compiled step) beside the
# plain one, the generator-vs-learner log-prob gap, and the served path (vLLM or SGLang at
# RIBBIT_BENCH_SERVED_URL; "not measured" without one). Needs only python3 with
# torch, transformers and peft (the lent machines' image has them; flash-linear-attention is
# used where installed); prints figures, asserts nothing. Arguments go to both processes,
# e.g. --budget-s 150 for each.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
BENCH=(timeout "${BENCH_TIMEOUT_S:-270}" "$PY" -m tests.benchmarks.bench_trainer_gpu)
"$PY" -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# Two processes: transformers picks the gated-DeltaNet kernels when it is imported, and fla
# 0.6 refuses its backward on Hopper with Triton < 3.7.1 (fla #640); then the learner is
# measured on transformers' torch kernels and decoding still on fla's.
learner_flags=()
if "$PY" -m tests.benchmarks.bench_trainer_gpu --fla-backward-refused; then
    echo "learner: fla's backward is refused on this GPU's Triton; the learner runs on torch kernels"
    learner_flags=(--no-fla)
fi
"${BENCH[@]}" --parts learner "${learner_flags[@]}" "$@" || echo "learner part failed: $?"
"${BENCH[@]}" --parts decode,fast,gap "$@" || echo "decode part failed: $?"
timeout "${BENCH_TIMEOUT_S:-270}" "$PY" -m tests.benchmarks.bench_served || echo "served part failed: $?"
