"""A served job finds its model's tokenizer wherever the weights are: what `ribbit model
pull` put under the weights folder, a promoted adapter's folder or its base, with
vLLM's and SGLang's names for the version; nothing found: bytes / 4, as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from worker.agent import OpenAIPolicy
from worker.agent.policy import count_message_tokens
from worker.agent.policy.served_tokenizer import tokenizer_sources
from worker.settings import ModelSettings

MODEL = "acme/tiny-coder"
MESSAGES = [{"role": "user", "content": "Fix add() in calc.py."}]


@pytest.fixture
def weights(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A weights folder holding MODEL's tokenizer where `ribbit model pull` puts it."""
    from transformers import AutoTokenizer

    root = tmp_path / "models"
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(root / MODEL)
    return root


def _adapter(tmp_path: Path, base: str, *, tokenizer_from: Path | None = None) -> Path:
    folder = tmp_path / "runs" / "v7"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
    if tokenizer_from is not None:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(folder)
    return folder


def _served(**settings: Any) -> OpenAIPolicy:
    return OpenAIPolicy(ModelSettings(policy="openai", **settings))


def _counts_with_a_tokenizer(policy: OpenAIPolicy) -> bool:
    tokenizer = policy.tokenizer
    return tokenizer is not None and count_message_tokens(MESSAGES, tokenizer) == len(
        tokenizer.apply_chat_template(MESSAGES, tokenize=True, return_dict=False)
    )


def test_pulled_weights_are_found_by_model_id(weights: Path) -> None:
    assert _counts_with_a_tokenizer(_served(model=MODEL, weights_dir=weights))
    assert tokenizer_sources(ModelSettings(model=MODEL, weights_dir=weights))[0] == str(
        weights / MODEL
    )


def test_without_the_weights_folder_nothing_is_found(weights: Path, tmp_path: Path) -> None:
    # The old lookup (the Hugging Face cache by id) finds nothing for pulled weights.
    assert _served(model=MODEL).tokenizer is None
    assert _served(model=MODEL, weights_dir=tmp_path / "elsewhere").tokenizer is None


@pytest.mark.parametrize("served_as", ["v7", f"{MODEL}:v7"], ids=["vllm", "sglang"])
def test_a_promoted_adapter_resolves_to_its_base(
    weights: Path, tmp_path: Path, served_as: str
) -> None:
    adapter = _adapter(tmp_path, MODEL)
    policy = _served(model=served_as, adapter_path=adapter, weights_dir=weights)
    assert _counts_with_a_tokenizer(policy)


def test_an_adapter_base_given_as_a_folder(weights: Path, tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, str(weights / MODEL))
    assert _counts_with_a_tokenizer(_served(model="v7", adapter_path=adapter))


def test_sglangs_name_alone_resolves_to_its_base(weights: Path) -> None:
    assert _counts_with_a_tokenizer(_served(model=f"{MODEL}:v7", weights_dir=weights))


def test_the_adapters_own_tokenizer_comes_first(tiny_model_dir: Path, tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, "nobody/nothing", tokenizer_from=tiny_model_dir)
    assert tokenizer_sources(ModelSettings(model="v7", adapter_path=adapter))[0] == str(adapter)
    assert _counts_with_a_tokenizer(_served(model="v7", adapter_path=adapter))


def test_a_name_that_is_no_model_id_never_escapes_the_weights_folder(
    weights: Path, tmp_path: Path
) -> None:
    assert all(
        not source.startswith(str(weights.parent / "x"))
        for source in tokenizer_sources(ModelSettings(model="../x", weights_dir=weights))
    )
