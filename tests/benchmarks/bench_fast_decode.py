"""The in-process fast decode path beside the plain one (the ``fast`` part of
``bench_trainer_gpu``): single-stream greedy tokens/s of each, their ratio, each against
the batch-1 bandwidth ceiling (target for the fast path: 0.25x, issue #34), and how far
the fast path's log-probs are from the plain path's on the same greedy tokens.

Tolerance: max |gap| <= 0.25 nats, mean <= 0.02, over the tokens before the two paths'
greedy choices first differ. Both paths compute logits in bf16, whose 8-bit mantissa
spaces values of 16 to 32 by 0.125, so a compiled kernel's different summation order
moves a logit by a step or two; greedy sequences may then part at a near-tie, which is
why only the common prefix is compared. Prints figures, asserts nothing.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from worker.agent.policy.fast_decode import plan_decode

MAX_GAP_NATS = 0.25
MEAN_GAP_NATS = 0.02
TARGET_OF_CEILING = 0.25


def _greedy(model: Any, prompt: torch.Tensor, new: int, extra: dict[str, Any]) -> Any:
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=new,
        min_new_tokens=new,
        do_sample=False,
        return_dict_in_generate=True,
        output_scores=True,
        **extra,
    )
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)


def _timed_greedy(
    model: Any, prompt: torch.Tensor, new: int, extra: dict[str, Any]
) -> tuple[Any, float]:
    if prompt.device.type == "cuda":
        torch.cuda.synchronize(prompt.device)
    start = time.perf_counter()
    out = _greedy(model, prompt, new, extra)
    if prompt.device.type == "cuda":
        torch.cuda.synchronize(prompt.device)
    return out, time.perf_counter() - start


def _chosen_logprobs(out: Any, prompt_len: int) -> tuple[list[int], torch.Tensor]:
    tokens = out.sequences[0, prompt_len:]
    scores = torch.stack([s[0] for s in out.scores]).float()  # (new, vocab)
    logprobs = torch.log_softmax(scores, dim=-1).gather(1, tokens.unsqueeze(1)).squeeze(1)
    return tokens.tolist(), logprobs


def compare(
    model: Any, device: torch.device, vocab: int, ceiling: float, prompt_len: int, new: int
) -> list[str]:
    """The lines comparing plain and fast single-stream decoding on ``model``."""
    model.eval()
    plan = plan_decode(model, "on")
    fast_extra = plan.generation_kwargs()
    gen = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, vocab, (1, prompt_len), generator=gen).to(device)
    lines = [f"fast decode plan: {'fast' if plan.fast else 'plain'} ({plan.reason})"]
    with torch.inference_mode():
        _greedy(model, prompt, 8, {})  # warm-up: kernels, allocator
        plain_out, plain_s = _timed_greedy(model, prompt, new, {})
        # Two warm-ups: the first compiles the step, the second captures its CUDA graph.
        _greedy(model, prompt, new, fast_extra)
        _greedy(model, prompt, new, fast_extra)
        fast_out, fast_s = _timed_greedy(model, prompt, new, fast_extra)
    plain_rate, fast_rate = new / plain_s, new / fast_s
    for name, rate in (("plain", plain_rate), ("fast", fast_rate)):
        line = f"in-process decode, {name}, 1 stream: {rate:.1f} tokens/s"
        if ceiling == ceiling:
            line += f", {rate / ceiling:.2f}x of the bandwidth ceiling"
        lines.append(line)
    lines.append(
        f"fast / plain: {fast_rate / plain_rate:.2f}x (target >= {TARGET_OF_CEILING}x "
        "of the ceiling for fast)"
    )
    lines.append(logprob_gap_line(plain_out, fast_out, prompt_len))
    return lines


def logprob_gap_line(plain_out: Any, fast_out: Any, prompt_len: int) -> str:
    plain_tokens, plain_lp = _chosen_logprobs(plain_out, prompt_len)
    fast_tokens, fast_lp = _chosen_logprobs(fast_out, prompt_len)
    common = next(
        (i for i, (a, b) in enumerate(zip(plain_tokens, fast_tokens, strict=True)) if a != b),
        len(plain_tokens),
    )
    if common == 0:
        return "fast vs plain log-probs: the first greedy token already differs"
    gap = (plain_lp[:common] - fast_lp[:common].to(plain_lp.device)).abs()
    within = gap.max().item() <= MAX_GAP_NATS and gap.mean().item() <= MEAN_GAP_NATS
    return (
        f"fast vs plain log-probs ({common} of {len(plain_tokens)} greedy tokens identical, "
        f"compared there): mean |gap| {gap.mean().item():.2e}, max {gap.max().item():.2e}; "
        f"{'within' if within else 'OUTSIDE'} tolerance (max {MAX_GAP_NATS}, "
        f"mean {MEAN_GAP_NATS} nats)"
    )
