"""What a job costs without a GPU: ``python -m tests.benchmarks.bench_cpu_job``.

The README's hardware table needs "CPU only" in minutes per job. This measures the
in-process policy's CPU path on a random-initialised model of FrogNano's configuration
(``bench_trainer_gpu.FROGNANO_4B``; random weights cost what the real ones do, and no hub
is reachable here) in fp32, the dtype ``worker/agent/policy/transformers_policy.py``
loads on a host without CUDA, with its decoding (plain ``generate``: the fast decode is off
on CPU by default):

- prefill tokens/s at two prompt lengths (the whole conversation is re-read every turn:
  the policy keeps no cache between turns, as Leaf's servers without prefix caching);
- decode tokens/s for one stream after a prompt, beside the batch-1 ceiling (weight bytes
  over the measured memory copy bandwidth: decoding reads every weight once a token);
- then an episode's wall clock from those two rates: the first prompt (system prompt, the
  five tool schemas and an issue, counted as the loop counts without a tokenizer) grows
  by what each turn generates and observes; printed per turn count, against the default
  ``RIBBIT_AGENT__MAX_MINUTES`` budget. The per-turn profile is an assumption, printed
  with the figures (``--turn-generated``, ``--turn-observed``).

Needs about 17 GiB of free memory (4.21 B parameters x 4 bytes) and a few minutes on two
cores. ``--smoke`` runs the same code on a tiny model of the family. Prints figures,
asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch

from tests.benchmarks.bench_trainer_gpu import FROGNANO_4B, SMOKE, build_model
from worker.agent.policy.base import count_message_tokens
from worker.agent.prompt import AgentTask, initial_messages
from worker.agent.tools import TOOL_SCHEMAS
from worker.settings import AgentSettings

# A mid-sized issue: the quickstart's first labelled issues are a few paragraphs.
_ISSUE_BODY = (
    "Calling `parse_version('1.0.0-rc.1+build.5')` raises ValueError, but the "
    "specification allows build metadata after a pre-release. Expected: a Version with "
    "prerelease ('rc', 1) and build ('build', 5).\n\n"
    "Steps to reproduce:\n\n```python\nfrom semver import parse_version\n"
    "parse_version('1.0.0-rc.1+build.5')\n```\n\n"
    "Traceback ends with `ValueError: invalid version string`. "
) * 3


@dataclass(frozen=True)
class CpuRates:
    """Measured on this host, one stream."""

    prefill_tokens_per_s: float
    decode_tokens_per_s: float


def first_prompt_tokens() -> int:
    """The first turn's prompt as the loop counts it without a tokenizer (a quarter of the
    UTF-8 bytes of the messages' JSON), plus the tool schemas the template adds."""
    task = AgentTask(title="parse_version rejects build metadata", body=_ISSUE_BODY)
    tools = [{"role": "system", "content": json.dumps(TOOL_SCHEMAS)}]
    return count_message_tokens(initial_messages(task), None) + count_message_tokens(tools, None)


def episode_minutes(
    rates: CpuRates, first_prompt: int, turns: int, generated: int, observed: int
) -> float:
    """Wall clock of ``turns`` model turns: each re-reads the conversation so far, then
    decodes ``generated`` tokens; each tool result adds ``observed`` tokens."""
    seconds = 0.0
    context = first_prompt
    for _ in range(turns):
        seconds += context / rates.prefill_tokens_per_s + generated / rates.decode_tokens_per_s
        context += generated + observed
    return seconds / 60


def turns_within(
    rates: CpuRates, first_prompt: int, minutes: float, generated: int, observed: int
) -> int:
    turns = 0
    while episode_minutes(rates, first_prompt, turns + 1, generated, observed) <= minutes:
        turns += 1
        if turns >= AgentSettings().max_turns:
            break
    return turns


def cpu_copy_bandwidth() -> float:
    """Bytes read plus written per second by a 256 MiB memory copy (best of five)."""
    src = torch.ones(2**28, dtype=torch.uint8)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() / best


class StepClock:
    """A logits processor that only notes the time: generate() calls it once a token, right
    after that token's forward pass. Its first call ends the prefill; the gaps between the
    later ones are decode steps, each timed alone (two generate calls subtracted would
    carry two prefills' noise into a few seconds of decoding)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.times.append(time.perf_counter())
        return scores


def measure(model: Any, vocab: int, prompt_lengths: list[int], new: int) -> CpuRates:
    """Prefill and decode rates at each prompt length; the longest one's are returned (a
    turn's cost grows with its context)."""
    from transformers import LogitsProcessorList

    gen = torch.Generator().manual_seed(0)
    rates = CpuRates(prefill_tokens_per_s=float("nan"), decode_tokens_per_s=float("nan"))
    with torch.inference_mode():
        model.generate(
            torch.randint(0, vocab, (1, 16), generator=gen), max_new_tokens=2, do_sample=False
        )  # warm-up: lazy initialisation is not a cost per job
        for length in prompt_lengths:
            prompt = torch.randint(0, vocab, (1, length), generator=gen)
            clock = StepClock()
            start = time.perf_counter()
            model.generate(
                prompt,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                logits_processor=LogitsProcessorList([clock]),
            )
            prefill_s = clock.times[0] - start
            steps = [b - a for a, b in itertools.pairwise(clock.times)]
            step_s = statistics.median(steps)
            rates = CpuRates(length / prefill_s, 1 / step_s)
            print(
                f"{length}-token prompt: prefill {prefill_s:.1f} s, "
                f"{rates.prefill_tokens_per_s:.1f} tokens/s; decode, 1 stream, {len(steps)} "
                f"steps: median {step_s:.2f} s a token ({min(steps):.2f}-{max(steps):.2f}), "
                f"{rates.decode_tokens_per_s:.2f} tokens/s"
            )
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny model of the family")
    parser.add_argument("--prompt-lengths", default="512,2048", help="prefill lengths")
    parser.add_argument("--new", type=int, default=32, help="tokens decoded a prompt")
    parser.add_argument(
        "--turn-generated", type=int, default=500, help="tokens the model writes a turn"
    )
    parser.add_argument(
        "--turn-observed", type=int, default=500, help="tokens a tool result adds a turn"
    )
    args = parser.parse_args(argv)
    values = SMOKE if args.smoke else FROGNANO_4B
    lengths = [int(x) for x in args.prompt_lengths.split(",") if x.strip()]
    print(
        f"host: {os.cpu_count()} cores, torch {torch.__version__} with "
        f"{torch.get_num_threads()} threads; model: "
        f"{'smoke' if args.smoke else 'FrogNano-4B configuration'}, random weights, fp32"
    )
    start = time.perf_counter()
    model = build_model(values, torch.device("cpu"), torch.float32)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(
        f"built in {time.perf_counter() - start:.0f} s: "
        f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, "
        f"{weight_bytes / 2**30:.1f} GiB"
    )
    bandwidth = cpu_copy_bandwidth()
    ceiling = bandwidth / weight_bytes
    print(
        f"memory bandwidth (copy, read+write): {bandwidth / 1e9:.1f} GB/s -> batch-1 decode "
        f"ceiling {ceiling:.2f} tokens/s"
    )
    rates = measure(model, int(values["vocab_size"]), lengths, args.new)
    # A copy reads and writes; decoding only reads, which can stream faster: a rough ceiling.
    print(f"decode: {rates.decode_tokens_per_s / ceiling:.2f}x of the copy-bandwidth ceiling")
    first = first_prompt_tokens()
    budget = AgentSettings().max_minutes
    gen, obs = args.turn_generated, args.turn_observed
    print(
        f"episode (assumed per turn: {gen} tokens generated, {obs} observed; first prompt "
        f"{first} tokens, counted as bytes/4):"
    )
    for turns in (1, 5, 10, 20):
        print(f"  {turns} turn(s): {episode_minutes(rates, first, turns, gen, obs):.0f} minutes")
    print(
        f"  within the default {budget:.0f}-minute agent budget: "
        f"{turns_within(rates, first, budget, gen, obs)} turn(s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
