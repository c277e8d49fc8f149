"""The learner at the real model's size: ``python -m tests.benchmarks.bench_trainer_gpu``.

A random-initialised model of FrogNano's configuration (the Qwen3.5-4B text
architecture: 32 layers, 3 gated-DeltaNet layers to each full-attention one, hidden
2560, MLP 9216, 16 query / 4 KV heads of 256, vocabulary 248320, tied embeddings;
from the published Megatron arguments for Qwen3.5-4B), bf16 on the GPU, LoRA r=16 on
every linear layer with gradient checkpointing: the learner's step time, tokens/s and
peak memory for one GRPO step over sequences of several lengths; then decode tokens/s
at 1 and N concurrent streams, time to first token, and the ratio to the memory-bandwidth
ceiling (weight bytes over measured copy bandwidth), which bounds batch-1 decode. The
widest decode line is the in-process rollout throughput; then the fast in-process decode
(static cache, compiled step) beside the plain one (``bench_fast_decode``); last, how far
the generator's log-probs are from the learner's on the same sampled tokens (the
importance weights' gap).
``--budget-s`` stops starting new measurements once the lent machine's few minutes are
spent. Random weights do not change these costs; the real checkpoint needs no download
for them. Prints figures, asserts nothing.

Without CUDA it says so and stops, unless ``--smoke`` (a 2-layer, narrow model of
the same family on CPU, to check the script itself).

One command on a GPU host: ``scripts/gpu-bench.sh``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch

from trainer.config import TrainSettings
from trainer.rl.learner import Learner, Sample

FROGNANO_4B = dict(
    vocab_size=248320,
    hidden_size=2560,
    intermediate_size=9216,
    num_hidden_layers=32,
    num_attention_heads=16,
    num_key_value_heads=4,
    head_dim=256,
    tie_word_embeddings=True,
    rope_theta=10_000_000.0,
    partial_rotary_factor=0.25,
)
# The measurements, each runnable alone: flash-linear-attention 0.6 refuses its backward on
# Hopper with Triton < 3.7.1 (its #640), so a lent machine with an older Triton measures the
# learner in one process without fla and decoding in another with it (scripts/gpu-bench.sh).
PARTS = frozenset({"learner", "decode", "fast", "gap"})
SMOKE = dict(
    FROGNANO_4B,
    vocab_size=4096,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=32,
    linear_value_head_dim=32,
)


def build_model(values: dict[str, Any], device: torch.device, dtype: torch.dtype) -> Any:
    from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

    config = Qwen3_5TextConfig(**values)
    with device:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def samples_of(length: int, n: int, vocab: int, prompt: int) -> list[Sample]:
    gen = torch.Generator().manual_seed(length)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab, (length,), generator=gen).tolist()
        mask = [0] * prompt + [1] * (length - prompt)
        out.append(Sample(ids, mask, 1.0 if i % 2 == 0 else -1.0))
    return out


def _peak_gib(device: torch.device) -> float:
    if device.type != "cuda":
        return float("nan")
    return torch.cuda.max_memory_allocated(device) / 2**30


def bench(
    values: dict[str, Any],
    device: torch.device,
    lengths: list[int],
    group: int,
    streams: list[int],
    parts: frozenset[str] = PARTS,
    decode_sizes: tuple[int, int] = (512, 128),
) -> None:
    """``decode_sizes``: prompt and generated tokens per decode stream."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    start = time.perf_counter()
    model = build_model(values, device, dtype)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: {params / 1e9:.2f} B parameters, {dtype}, {device}, "
        f"built in {time.perf_counter() - start:.1f} s, {_peak_gib(device):.1f} GiB"
    )
    settings = TrainSettings(
        model="random-init",
        lora_r=16,
        lora_alpha=32,
        gradient_checkpointing=True,
        logprob_chunk_tokens=1024,
        learning_rate=1e-5,
    )
    learner = Learner(model, None, settings)  # type: ignore[arg-type]  # no tokenizer needed
    trainable = sum(p.numel() for p in learner.params)
    print(f"LoRA r=16, default targets: {trainable / 1e6:.1f} M trainable parameters")
    vocab = int(values["vocab_size"])
    for length in lengths if "learner" in parts else []:
        if over_budget():
            print(f"skipped: learner step at {length} tokens (time budget)")
            continue
        samples = samples_of(length, group, vocab, prompt=min(1024, length // 4))
        learner.step(samples[:1])  # warm-up: kernels, allocator
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        learner.step(samples)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        tokens = length * group
        print(
            f"learner step, {group} x {length} tokens: {elapsed:.2f} s, "
            f"{tokens / elapsed:.0f} tokens/s, peak {_peak_gib(device):.1f} GiB"
        )

    if "decode" in parts:
        if over_budget():
            print("skipped: decode and rollout figures (time budget spent by the learner)")
            return
        decode(learner.model, device, values, streams, *decode_sizes)
    if "fast" in parts:
        if over_budget():
            print("skipped: fast vs plain in-process decode (time budget)")
            return
        from tests.benchmarks.bench_fast_decode import compare

        ceiling = batch1_ceiling(learner.model, device)
        for line in compare(learner.model, device, vocab, ceiling, *decode_sizes):
            print(line)
    if "gap" in parts:
        if over_budget():
            print("skipped: generator-vs-learner log-prob gap (time budget)")
            return
        behaviour_gap(learner, device, vocab, *decode_sizes)


def decode(
    model: Any,
    device: torch.device,
    values: dict[str, Any],
    streams: list[int],
    prompt_len: int = 512,
    new: int = 128,
) -> None:
    """Greedy decode through transformers' generate (the in-process policy's path).

    Decode at batch 1 is bound by reading every weight once per token, so the ceiling is
    copy bandwidth / weight bytes; the ratio says how far the in-process path is from it.
    """
    model.eval()  # the learner left it in train mode, where checkpointing disables the KV cache
    vocab = int(values["vocab_size"])
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = copy_bandwidth(device)
    ceiling = bandwidth / weight_bytes  # nan on CPU
    print(
        f"memory bandwidth (device copy, read+write): {bandwidth / 1e12:.2f} TB/s; "
        f"weights {weight_bytes / 2**30:.1f} GiB -> batch-1 decode ceiling {ceiling:.0f} tokens/s"
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        warm = torch.randint(0, vocab, (1, prompt_len), generator=gen).to(device)
        model.generate(warm, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        ttft = _timed(device, lambda: model.generate(warm, max_new_tokens=1, do_sample=False))
        print(f"time to first token ({prompt_len}-token prompt, batch 1): {ttft * 1000:.0f} ms")
        for n in streams:
            if over_budget():
                print(f"skipped: decode at {n} streams (time budget)")
                continue
            prompts = torch.randint(0, vocab, (n, prompt_len), generator=gen).to(device)
            elapsed = _timed(
                device,
                lambda p=prompts: model.generate(
                    p, max_new_tokens=new, min_new_tokens=new, do_sample=False
                ),
            )
            per_stream = new / elapsed
            line = (
                f"decode, {n} stream(s), {prompt_len}-token prompts: "
                f"{per_stream:.1f} tokens/s per stream, {n * per_stream:.1f} tokens/s total"
            )
            if n == 1 and ceiling == ceiling:
                line += f", {per_stream / ceiling:.2f}x of the bandwidth ceiling"
            print(line)
    print(
        "rollout throughput (in-process, the training rollouts' generation): the total "
        "tokens/s of the widest decode line above"
    )


def behaviour_gap(
    learner: Learner, device: torch.device, vocab: int, prompt_len: int = 256, new: int = 64
) -> None:
    """How far the generator's log-probs (cached decode, batched) are from the learner's
    (one full forward per sequence) on the same tokens: the importance weights the loss
    applies (trainer/rl/loss.py) are exp(learner - generator), capped at
    ``TrainSettings.tis_cap``. On the CPU test the gap is ~7e-4 per token; here it
    is bf16 kernels on both sides, the in-process path (a server's kernels differ again).
    """
    import math

    model = learner.model
    model.eval()
    dtype = next(model.parameters()).dtype
    n = 4
    gen = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, vocab, (n, prompt_len), generator=gen).to(device)
    with torch.no_grad():
        out = model.generate(
            prompts,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            output_scores=True,
            return_dict_in_generate=True,
        )
        scores = torch.stack(out.scores, dim=1).float()  # (n, new, vocab), temperature 1
        generated = out.sequences[:, prompt_len:]
        sampler = torch.log_softmax(scores, dim=-1).gather(2, generated.unsqueeze(2)).squeeze(2)
        gaps = []
        for row in range(n):
            ids = out.sequences[row].tolist()
            mine = learner.token_logprobs(ids)[prompt_len - 1 :].float()
            gaps.append(mine - sampler[row])
        gap = torch.cat(gaps)
    cap = math.log(learner.settings.tis_cap)
    print(
        f"generator vs learner log-probs ({n} x {new} sampled tokens, {dtype} both): "
        f"mean |gap| {gap.abs().mean().item():.2e}, max {gap.abs().max().item():.2e}, "
        f"{(gap > cap).float().mean().item() * 100:.2f}% of tokens over the importance "
        f"cap ({learner.settings.tis_cap:g})"
    )


def batch1_ceiling(model: Any, device: torch.device) -> float:
    """Batch-1 decode tokens/s if every weight is read once per token at copy bandwidth."""
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return copy_bandwidth(device) / weight_bytes


def copy_bandwidth(device: torch.device) -> float:
    """Bytes read plus written per second by a large device-to-device copy (nan on CPU)."""
    if device.type != "cuda":
        return float("nan")
    src = torch.empty(2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    elapsed = _timed(device, lambda: [dst.copy_(src) for _ in range(10)]) / 10
    return 2 * src.numel() / elapsed


def _timed(device: torch.device, fn: Any) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


_DEADLINE = [float("inf")]


def over_budget() -> bool:
    return time.monotonic() > _DEADLINE[0]


def fast_kernels() -> None:
    """Qwen3.5's gated-DeltaNet layers run on these kernels when installed, else on torch."""
    import importlib.util

    for module, package in (("fla", "flash-linear-attention"), ("causal_conv1d", "causal-conv1d")):
        found = importlib.util.find_spec(module) is not None
        print(f"{package}: {'installed' if found else 'NOT installed (torch fallback measured)'}")
    print("the served path (vLLM/SGLang) is measured apart: tests/benchmarks/bench_served.py")


def fla_backward_refused() -> bool:
    """flash-linear-attention is installed but would refuse the learner's backward here."""
    import importlib.util

    if importlib.util.find_spec("fla") is None or not torch.cuda.is_available():
        return False
    import triton

    version = tuple(int(x) for x in triton.__version__.split(".")[:3] if x.isdigit())
    return torch.cuda.get_device_capability()[0] == 9 and version < (3, 7, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny model of the family, any device")
    parser.add_argument("--lengths", default="2048,8192,16384", help="sequence lengths")
    parser.add_argument("--group", type=int, default=4, help="sequences per step")
    parser.add_argument("--streams", default="1,8,32", help="concurrent decode streams")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="start no new measurement after this many seconds (the lent GPU's time is short)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(sorted(PARTS)),
        help="which measurements: learner, decode, fast, gap (comma-separated)",
    )
    parser.add_argument(
        "--no-fla",
        action="store_true",
        help="measure with transformers' torch kernels even where fla is installed",
    )
    parser.add_argument(
        "--fla-backward-refused",
        action="store_true",
        help="only say (exit 0) whether fla would refuse the learner's backward here",
    )
    args = parser.parse_args(argv)
    if args.fla_backward_refused:
        return 0 if fla_backward_refused() else 1
    if args.no_fla:
        sys.modules["fla"] = None  # type: ignore[assignment]  # makes `import fla` fail
    parts = frozenset(x.strip() for x in args.parts.split(",") if x.strip())
    if not parts <= PARTS:
        parser.error(f"--parts: unknown {sorted(parts - PARTS)}; choose from {sorted(PARTS)}")
    _DEADLINE[0] = time.monotonic() + args.budget_s
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("bench_trainer_gpu: no CUDA device; run it on a GPU host (or --smoke on CPU)")
        return 0
    device = torch.device("cuda" if cuda else "cpu")
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    streams = [int(x) for x in args.streams.split(",") if x.strip()]
    if args.smoke:
        lengths = [min(x, 256) for x in lengths]
    fast_kernels()
    values, decode_sizes = (SMOKE, (32, 8)) if args.smoke else (FROGNANO_4B, (512, 128))
    bench(values, device, lengths, args.group, streams, parts, decode_sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
