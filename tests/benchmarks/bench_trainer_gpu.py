"""The learner at the real model's size: ``python -m tests.benchmarks.bench_trainer_gpu``.

A random-initialised model of FrogNano's configuration (the Qwen3.5-4B text
architecture: 32 layers, 3 gated-DeltaNet layers to each full-attention one, hidden
2560, MLP 9216, 16 query / 4 KV heads of 256, vocabulary 248320, tied embeddings;
from the published Megatron arguments for Qwen3.5-4B), bf16 on the GPU, LoRA r=16 on
every linear layer with gradient checkpointing: the learner's step time, tokens/s and
peak memory for one GRPO step over sequences of several lengths, and generation
tokens/s. Random weights do not change these costs; the real checkpoint needs no
download for them. Prints figures, asserts nothing.

Without CUDA it says so and stops, unless ``--smoke`` (a 2-layer, narrow model of
the same family on CPU, to check the script itself).
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


def bench(values: dict[str, Any], device: torch.device, lengths: list[int], group: int) -> None:
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
    print(f"LoRA r=16 all-linear: {trainable / 1e6:.1f} M trainable parameters")
    vocab = int(values["vocab_size"])
    for length in lengths:
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

    prompt = torch.randint(0, vocab, (1, 512), device=device)
    new = 128
    with torch.no_grad():
        learner.model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        learner.model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    print(f"generation (transformers, batch 1, 512-token prompt): {new / elapsed:.1f} tokens/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny model of the family, any device")
    parser.add_argument("--lengths", default="2048,8192,16384", help="sequence lengths")
    parser.add_argument("--group", type=int, default=4, help="sequences per step")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("bench_trainer_gpu: no CUDA device; run it on a GPU host (or --smoke on CPU)")
        return 0
    device = torch.device("cuda" if cuda else "cpu")
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    if args.smoke:
        lengths = [min(x, 256) for x in lengths]
    bench(SMOKE if args.smoke else FROGNANO_4B, device, lengths, args.group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
