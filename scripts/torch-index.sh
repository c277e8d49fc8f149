#!/usr/bin/env bash
# Prints the pip arguments that install torch's CPU build: `--index-url <PyTorch's CPU index>`
# when that index answers, else nothing, so pip uses the index it is configured with (a
# mirror, or a machine whose own index serves the CPU wheel). The Makefile's PIP_TORCH_ARGS
# defaults to this, so `make serve` on a CPU host never downloads CUDA torch from PyPI,
# where the plain `torch` name is the CUDA build with its nvidia packages (about 3 GB).
#
# TORCH_CPU_INDEX: the index to probe (default https://download.pytorch.org/whl/cpu);
# TORCH_INDEX_TIMEOUT: seconds the probe waits (default 5), so an offline host starts fast.
set -euo pipefail
index=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
timeout=${TORCH_INDEX_TIMEOUT:-5}
# The project page of torch (PEP 503), the page pip itself reads: a 200 there means pip
# will find the wheels; a proxy's error page or a refused connection does not.
if "${PYTHON:-python3}" - "${index%/}/torch/" "$timeout" <<'EOF' 2>/dev/null; then
import sys
import urllib.request

url, timeout = sys.argv[1], float(sys.argv[2])
with urllib.request.urlopen(url, timeout=timeout) as answer:
    sys.exit(0 if answer.status == 200 else 1)
EOF
  printf -- '--index-url %s\n' "$index"
else
  echo "torch-index: $index did not answer; torch comes from pip's configured index" >&2
fi
