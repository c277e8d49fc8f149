"""Training settings: one dataclass, readable by ``transformers.HfArgumentParser``; `ribbit
train` makes its options from it too (trainer/cli/training.py), so each field's help is
the option's help."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# What `lora_target_modules` means when left at its default: the family's entry in
# LORA_TARGETS, else peft's "all-linear".
AUTO_LORA_TARGETS = "auto"

# Qwen3.5 is a hybrid: three gated-DeltaNet (linear-attention) layers to one full-attention
# layer. Neither inference server serves LoRA on the DeltaNet projections today
# (`linear_attn.in_proj_qkv/z/b/a`, `linear_attn.out_proj`): vllm-project/vllm#49354 (open)
# serves such an adapter with generations unchanged from the base, and SGLang cannot load
# split `in_proj_b`/`in_proj_a` adapters (sgl-project/sglang#31522, open). peft's
# "all-linear" wraps them, so a promoted version would silently behave like the base on
# the fleet path. Names are transformers 5.24's Qwen3_5 modules; peft matches them as
# name suffixes, and none is a suffix of a DeltaNet module's name (`out_proj` is not
# `o_proj`). The MLPs of every layer are plain gate/up/down projections, served by both.
_QWEN3_5_LORA_TARGETS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)

# Default LoRA target modules per model family (`config.model_type`): only families whose
# "all-linear" adapter the servers cannot serve. The real model's config.json says
# `qwen3_5`; loaded through AutoModelForCausalLM (the text model, as the learner does) it
# says `qwen3_5_text`, as the tests' tiny model does.
LORA_TARGETS: dict[str, tuple[str, ...]] = {
    "qwen3_5": _QWEN3_5_LORA_TARGETS,
    "qwen3_5_text": _QWEN3_5_LORA_TARGETS,
}


def lora_target_modules(setting: str, model_type: str) -> str | list[str]:
    """peft's ``target_modules`` for ``setting`` (a `TrainSettings.lora_target_modules`) on a
    model of family ``model_type``: "auto" picks the family's default, "all-linear" passes
    through, anything else is a comma-separated list of module names that wins as given."""
    if setting == AUTO_LORA_TARGETS:
        family = LORA_TARGETS.get(model_type)
        return list(family) if family is not None else "all-linear"
    if setting == "all-linear":
        return setting
    return [name.strip() for name in setting.split(",") if name.strip()]


@dataclass(frozen=True)
class ServingDeparture:
    """One place where a training rollout samples or is limited unlike a served job."""

    setting: str  # the field's name in TrainSettings and in worker.settings.AgentSettings
    training: float
    serving: float
    why: str


# Rollouts run the served episode (same prompt, tools, turns, context window, tokens per
# turn, thinking mode and repetition penalty; trainer.train.agent_limits builds them from
# the serving defaults) except where listed here, each on purpose. A test holds this list,
# the defaults of both configs and trainer/README.md ("Training versus serving") together.
SERVING_DEPARTURES: tuple[ServingDeparture, ...] = (
    ServingDeparture(
        "temperature",
        1.0,
        0.6,
        "the policy gradient is for the model's own distribution: the learner divides the "
        "logits by the same temperature, and 1.0 gives the varied groups GRPO needs",
    ),
    ServingDeparture(
        "top_p",
        1.0,
        0.95,
        "a truncated nucleus samples from a distribution the learner does not score, so "
        "the importance ratios would be off; off keeps them exact",
    ),
    ServingDeparture(
        "top_k", 0, 20, "as top_p: truncation would make the learner's log-probs disagree"
    ),
    ServingDeparture(
        "max_minutes",
        30.0,
        50.0,
        "a step waits for its slowest rollout; a rollout cut at 30 minutes is masked out "
        "(mask_truncated), so the cap bounds step time without training on cut-off work",
    ),
)


@dataclass
class TrainSettings:
    model: str = field(
        default="microsoft/FrogNano-4B-2609", metadata={"help": "Base model path or hub id."}
    )
    store_dir: str = field(default="var/trainer", metadata={"help": "Environment store root."})
    output_dir: str = field(
        default="var/trainer/runs/latest", metadata={"help": "Where checkpoints and metrics go."}
    )
    envs: str = field(default="all", metadata={"help": "all, split:<name>, signal, or ids a,b,c."})
    steps: int = field(
        default=100, metadata={"help": "Optimizer steps (one batch of groups each)."}
    )
    group_size: int = field(
        default=8,
        metadata={
            "help": "Rollouts per environment per step (G); advantages are normalised "
            "within a group."
        },
    )
    envs_per_step: int = field(default=1, metadata={"help": "Environments (groups) per step."})
    finetune: Literal["lora", "full"] = field(
        default="lora",
        metadata={"help": "Train a LoRA adapter (promotable without a restart) or every weight."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(
        default=0.0, metadata={"help": "LoRA dropout (0 keeps ratios exact)."}
    )
    lora_target_modules: str = field(
        default=AUTO_LORA_TARGETS,
        metadata={
            "help": "peft target modules: comma-separated names, all-linear, or auto (the "
            "model family's default that vLLM/SGLang can serve; for qwen3_5, the "
            "full-attention and MLP projections, no linear-attention layer)."
        },
    )
    learning_rate: float = field(default=1e-5, metadata={"help": "AdamW learning rate."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping norm."})
    updates_per_batch: int = field(
        default=1, metadata={"help": "Optimizer updates per rollout batch."}
    )
    baseline: str = field(default="mean", metadata={"help": "mean or leave_one_out."})
    scale_by_std: bool = field(default=True, metadata={"help": "Divide advantages by group std."})
    eps_low: float = field(default=0.2, metadata={"help": "Lower clip range."})
    eps_high: float = field(default=0.28, metadata={"help": "Upper clip range (clip-higher)."})
    aggregation: str = field(
        default="token_mean", metadata={"help": "token_mean, sequence_mean, dr_grpo."}
    )
    kl_coef: float = field(default=0.0, metadata={"help": "k3 KL coefficient to the base model."})
    tis_cap: float = field(
        default=2.0,
        metadata={"help": "Cap of the importance weight for rollouts sampled by a server."},
    )
    mask_truncated: bool = field(default=True, metadata={"help": "No loss on cut-off rollouts."})
    filter_zero_variance: bool = field(
        default=True, metadata={"help": "Drop groups with equal rewards."}
    )
    logprob_chunk_tokens: int = field(
        default=1024, metadata={"help": "Positions per lm_head chunk."}
    )
    gradient_checkpointing: bool = field(default=False, metadata={"help": "Recompute activations."})
    # Where these differ from serving (worker.settings.AgentSettings), and why:
    # SERVING_DEPARTURES above.
    temperature: float = field(
        default=1.0,
        metadata={
            "help": "Rollout sampling temperature (serving: 0.6; 1.0 samples the model's own "
            "distribution, which the learner scores)."
        },
    )
    top_p: float = field(
        default=1.0,
        metadata={"help": "Rollout top-p (1: off, keeps ratios exact; serving: 0.95)."},
    )
    top_k: int = field(
        default=0, metadata={"help": "Rollout top-k (0: off, keeps ratios exact; serving: 20)."}
    )
    max_new_tokens: int = field(
        default=8192, metadata={"help": "New tokens per model turn (as serving)."}
    )
    max_turns: int = field(default=100, metadata={"help": "Agent turns per rollout (as serving)."})
    max_minutes: float = field(
        default=30.0,
        metadata={
            "help": "Wall clock per rollout (serving: 50; shorter bounds a step's time, and "
            "a cut-off rollout is masked)."
        },
    )
    save_every: int = field(
        default=10, metadata={"help": "Checkpoint every N steps (0: only at end)."}
    )
    seed: int = field(default=0, metadata={"help": "Seed for torch and python RNGs."})

    def __post_init__(self) -> None:
        # Imported here: the CLI reads this class to make `ribbit train`'s options, and
        # `ribbit --help` must not wait for torch (these modules' tensors need it).
        from trainer.rl.advantages import BASELINES
        from trainer.rl.loss import AGGREGATIONS

        checks = [
            (self.steps >= 1, f"steps must be >= 1; got {self.steps}"),
            (
                self.group_size >= 2,
                f"group_size must be >= 2 (GRPO compares rollouts); got {self.group_size}",
            ),
            (self.envs_per_step >= 1, f"envs_per_step must be >= 1; got {self.envs_per_step}"),
            (
                self.finetune in ("lora", "full"),
                f"finetune must be lora or full; got {self.finetune!r}",
            ),
            (
                self.baseline in BASELINES,
                f"baseline must be one of {BASELINES}; got {self.baseline!r}",
            ),
            (
                self.aggregation in AGGREGATIONS,
                f"aggregation must be one of {AGGREGATIONS}; got {self.aggregation!r}",
            ),
            (self.learning_rate > 0, f"learning_rate must be > 0; got {self.learning_rate}"),
            (
                self.updates_per_batch >= 1,
                f"updates_per_batch must be >= 1; got {self.updates_per_batch}",
            ),
            (self.logprob_chunk_tokens >= 1, "logprob_chunk_tokens must be >= 1"),
            (self.temperature > 0, "temperature must be > 0 (GRPO needs sampled, varied rollouts)"),
            (self.lora_r >= 1, f"lora_r must be >= 1; got {self.lora_r}"),
            (
                self.lora_target_modules.strip(", ") != "",
                "lora_target_modules must name modules, all-linear or auto",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
