"""Which modules the learner's LoRA adapter wraps: by default, for the real model's family
(qwen3_5), only what vLLM and SGLang can serve (full-attention and MLP projections, no
gated-DeltaNet module; see trainer/config.py LORA_TARGETS); an explicit list still wins."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from trainer.config import (
    AUTO_LORA_TARGETS,
    LORA_TARGETS,
    TrainSettings,
    lora_target_modules,
)
from trainer.rl.learner import Learner

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def tiny_qwen3_5_config() -> Any:
    from transformers import Qwen3_5TextConfig

    # Four layers: three linear-attention layers, then one full-attention layer.
    return Qwen3_5TextConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        linear_num_key_heads=1,
        linear_num_value_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
    )


def wrapped_modules(settings: TrainSettings, config: Any) -> set[str]:
    """Names (without peft's prefix) of the modules the learner's adapter wraps."""
    from peft.tuners.lora import LoraLayer
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    learner = Learner(model, None, settings)  # type: ignore[arg-type]  # no tokenizer needed
    base = learner.model.get_base_model()
    return {name for name, module in base.named_modules() if isinstance(module, LoraLayer)}


def layer_indices(config: Any, kind: str) -> list[int]:
    return [i for i, t in enumerate(config.layer_types) if t == kind]


def test_default_adapter_on_qwen3_5_wraps_no_linear_attention_module(
    tiny_qwen3_5_config: Any,
) -> None:
    config = tiny_qwen3_5_config
    settings = TrainSettings(model="tiny", lora_r=2)
    assert settings.lora_target_modules == AUTO_LORA_TARGETS
    wrapped = wrapped_modules(settings, config)

    assert not [name for name in wrapped if ".linear_attn." in name]
    full = layer_indices(config, "full_attention")
    linear = layer_indices(config, "linear_attention")
    assert full and linear  # the tiny model is the hybrid the default is for
    expected = {f"model.layers.{i}.self_attn.{p}" for i in full for p in ATTENTION} | {
        f"model.layers.{i}.mlp.{p}" for i in range(config.num_hidden_layers) for p in MLP
    }
    assert wrapped == expected


def test_all_linear_still_reaches_the_linear_attention_projections(
    tiny_qwen3_5_config: Any,
) -> None:
    """What the default avoids (and what the test above would catch): all-linear, asked
    for by name, wraps the gated-DeltaNet projections too."""
    wrapped = wrapped_modules(
        TrainSettings(model="tiny", lora_r=2, lora_target_modules="all-linear"),
        tiny_qwen3_5_config,
    )
    (first_linear, *_) = layer_indices(tiny_qwen3_5_config, "linear_attention")
    for name in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"):
        assert f"model.layers.{first_linear}.linear_attn.{name}" in wrapped


def test_an_explicit_target_list_wins_over_the_family_default(
    tiny_qwen3_5_config: Any,
) -> None:
    wrapped = wrapped_modules(
        TrainSettings(model="tiny", lora_r=2, lora_target_modules=" in_proj_b, lm_head ,"),
        tiny_qwen3_5_config,
    )
    linear = layer_indices(tiny_qwen3_5_config, "linear_attention")
    assert wrapped == {f"model.layers.{i}.linear_attn.in_proj_b" for i in linear} | {"lm_head"}


def test_the_table_is_keyed_by_the_families_transformers_spells() -> None:
    """The real model's config.json says qwen3_5 and the learner's AutoModelForCausalLM
    loads it as qwen3_5_text: a misspelt key would silently fall back to all-linear."""
    from transformers import Qwen3_5Config, Qwen3_5TextConfig

    assert Qwen3_5Config.model_type in LORA_TARGETS
    assert Qwen3_5TextConfig.model_type in LORA_TARGETS


@pytest.mark.parametrize(
    ("setting", "model_type", "expected"),
    [
        ("auto", "qwen3", "all-linear"),  # other families keep peft's all-linear
        ("auto", "llama", "all-linear"),
        ("auto", "", "all-linear"),
        ("all-linear", "qwen3_5", "all-linear"),
        ("q_proj,o_proj", "qwen3", ["q_proj", "o_proj"]),
        (" lm_head ", "qwen3_5_text", ["lm_head"]),
    ],
)
def test_lora_target_modules(setting: str, model_type: str, expected: object) -> None:
    assert lora_target_modules(setting, model_type) == expected


def test_the_qwen3_5_default_names_attention_and_mlp_projections_only() -> None:
    assert lora_target_modules("auto", "qwen3_5") == [*ATTENTION, *MLP]


@pytest.mark.parametrize("setting", ["", " ", ",", " , "])
def test_an_empty_target_list_is_refused(setting: str) -> None:
    with pytest.raises(ValueError, match="lora_target_modules"):
        TrainSettings(lora_target_modules=setting)
