"""`make bench`: every benchmark, one after the other (figures and ratios, no assertions)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = [
    "bench_webhooks",
    "bench_agent",
    "bench_sandbox",
    "bench_envcache",
    "bench_gates",
    "bench_grade",
    "bench_trainer",
    "bench_trainer_gpu",
]


def main() -> int:
    for name in BENCHMARKS:
        try:
            module = importlib.import_module(f"tests.benchmarks.{name}")
        except ModuleNotFoundError:
            continue
        print(f"\n=== {name} ===", flush=True)
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
