#!/usr/bin/env bash
# The GPU benchmark in one command (issue #16 item 7), sized for a short lease on one GPU:
# the learner at the real 4B configuration, decode at 1 and N streams, time to first token
# and the bandwidth ratio. Needs only python3 with torch, transformers and peft (the lent
# machines' image has them); prints figures, asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
"$PY" -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout "${BENCH_TIMEOUT_S:-540}" "$PY" -m tests.benchmarks.bench_trainer_gpu "$@"
