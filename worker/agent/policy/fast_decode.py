"""How the in-process backend decodes: transformers' plain path, or its documented fast
generation path (a static KV cache, with the hybrid model's recurrent and convolution
states kept in the same cache object, and the decode step compiled with
``torch.compile(mode="reduce-overhead")``, i.e. captured as a CUDA graph).

Why: plain ``generate`` on a dynamic cache launches every kernel of every layer from
Python for each token; for a 4B model at batch 1 that overhead, not the weights' reads,
sets the pace (8.1 tokens/s on an H200, 0.02x of its bandwidth ceiling; issue #34). A
static cache gives the decode step fixed shapes, so it can be captured once and replayed.

The plan is decided once per loaded model (:func:`plan_decode`) and carried as a
:class:`DecodePlan`; the policy adds its :meth:`DecodePlan.generation_kwargs` to its
``GenerationConfig``. Greedy tokens are the same as on the plain path (a test on the tiny
model checks it on CPU); on a GPU the compiled kernels' bf16 rounding differs slightly
(the GPU script prints the log-prob gap against its stated tolerance).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)

FastDecodeMode = Literal["auto", "on", "off"]


@dataclass(frozen=True)
class DecodePlan:
    """What one loaded model's ``generate`` calls add for fast decoding, and why."""

    static_cache: bool
    compile: bool
    reason: str
    # "inductor" is what makes the step fast; tests pass "eager" to check on CPU that the
    # traced step gives the same tokens without paying inductor's compile time.
    compile_backend: str = "inductor"
    compile_any_device: bool = False  # transformers compiles only on accelerators unless set

    @property
    def fast(self) -> bool:
        return self.static_cache

    def generation_kwargs(self) -> dict[str, Any]:
        """Extra ``GenerationConfig`` fields for this plan (none for the plain path)."""
        if not self.static_cache:
            return {}
        if not self.compile:
            return {"cache_implementation": "static", "disable_compile": True}
        from transformers import CompileConfig

        config = CompileConfig(backend=self.compile_backend, mode="reduce-overhead")
        # A private switch of transformers 5 (generation/configuration_utils.py), the only
        # way to let it compile on a CPU; used by the CPU test and nothing else.
        config._compile_all_devices = self.compile_any_device  # type: ignore[assignment]
        return {"cache_implementation": "static", "compile_config": config}


def plain(reason: str) -> DecodePlan:
    return DecodePlan(static_cache=False, compile=False, reason=reason)


def plan_decode(model: Any, mode: FastDecodeMode) -> DecodePlan:
    """The decode plan for ``model`` under ``RIBBIT_MODEL__FAST_DECODE``; logged, since a
    fallback to the plain path costs an order of magnitude in speed on a GPU."""
    plan = _plan(model, mode)
    log.info("in-process decoding: %s (%s)", "fast" if plan.fast else "plain", plan.reason)
    return plan


def _plan(model: Any, mode: FastDecodeMode) -> DecodePlan:
    if mode == "off":
        return plain("RIBBIT_MODEL__FAST_DECODE=off")
    device = _device_type(model)
    if mode == "auto" and device != "cuda":
        return plain(f"auto on {device}: a static cache and a compiled step pay off on a GPU")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    unsupported = _static_cache_unsupported(base)
    if unsupported:
        return plain(unsupported)
    if device != "cuda":
        return DecodePlan(True, False, f"static cache on {device}; the step is compiled on CUDA")
    if not getattr(base, "_can_compile_fullgraph", False):
        return DecodePlan(True, False, f"{type(base).__name__} is not declared compilable")
    quantizer = getattr(base, "hf_quantizer", None)
    if quantizer is not None and not quantizer.is_compileable:
        return DecodePlan(True, False, "this quantisation cannot be compiled")
    return DecodePlan(True, True, "static cache, decode step compiled (reduce-overhead)")


def _device_type(model: Any) -> str:
    return str(next(model.parameters()).device.type)


def _static_cache_unsupported(model: Any) -> str:
    """Why ``model`` cannot decode on transformers' StaticCache, or "" if it can.

    Asked of the cache itself: transformers builds a StaticCache from the model's config
    (full-attention, sliding-window and linear-attention layers each get their static
    kind), and a model family with a cache of its own refuses it there or in generate."""
    supports = getattr(type(model), "_supports_default_dynamic_cache", None)
    if supports is not None and not supports():
        return f"{type(model).__name__} keeps a cache of its own"
    try:
        from transformers import StaticCache

        StaticCache(config=model.config.get_text_config(decoder=True), max_cache_len=8)
    except (TypeError, ValueError, NotImplementedError, AttributeError) as exc:
        return f"no static cache for {type(model).__name__}: {exc}"
    return ""
