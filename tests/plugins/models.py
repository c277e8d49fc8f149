"""Fixtures for the models area: tiny real models built in a couple of seconds.

``tiny_model_dir`` is a randomly initialised model of the real model's family
(``qwen3_5``) with a byte-level BPE tokenizer trained here on a small corpus,
the Qwen special tokens, and a chat template of our own in Qwen3.5's format
(tools as JSON lines in the system turn, calls as ``<tool_call><function=..>``
XML, results in ``<tool_response>`` inside a user turn). It is saved with
``save_pretrained`` and meant to be loaded back through the Auto classes
(``TransformersPolicy`` does). The trainer reuses it.

``programmed_model_dir`` derives models whose next token depends only on the
current one, with chosen transitions (all layers zeroed so the residual stream
is the token embedding; the lm_head maps chosen embeddings to chosen next
tokens). They let tests drive the real transformers backend to each ending:
a tool call every turn, immediate EOS, never EOS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]
# One token holding a whole, valid tool call: a programmed model can emit it in one step.
GLOB_CALL_TOKEN = (
    "<tool_call>\n<function=Glob>\n<parameter=pattern>\n*.py\n</parameter>\n</function>\n"
    "</tool_call>"
)

CHAT_TEMPLATE = r"""
{%- if tools %}
{{- '<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>' }}
{%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\n</tools>\n\nIf you choose to call a function ONLY reply in the following format' }}
{{- ' with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n' }}
{{- '<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call>' }}
{%- if messages[0].role == 'system' %}{{- '\n\n' + messages[0].content }}{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n<think>\n' + (message.reasoning_content or '') }}
{{- '\n</think>\n\n' + (message.content or '') }}
{%- if message.tool_calls %}
{%- for tc in message.tool_calls %}
{%- set f = tc.function if tc.function is defined else tc %}
{%- if loop.first and not message.content %}{{- '<tool_call>\n<function=' + f.name + '>\n' }}
{%- else %}{{- '\n<tool_call>\n<function=' + f.name + '>\n' }}{%- endif %}
{%- for k, v in f.arguments | items %}
{{- '<parameter=' + k + '>\n' + (v if v is string else v | tojson) + '\n</parameter>\n' }}
{%- endfor %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.previtem and loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}
{%- else %}{{- '<think>\n' }}{%- endif %}
{%- endif %}
""".strip()

_CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "import os\nimport sys\n\nclass Greeter:\n    def greet(self, name):\n"
    "        return f'hello {name}'\n",
    "You are a software engineering agent working in a checked-out git repository.",
    "Resolve the following issue. Run the tests with: python -m pytest -q",
    '{"type": "function", "function": {"name": "Read", "description": "Read a file", '
    '"parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}}}}',
    "<function=Bash>\n<parameter=command>\ngit status && ls -la\n</parameter>\n</function>",
    "<parameter=old_string>\nreturn a - b\n</parameter>\n<parameter=new_string>\nreturn a + b\n",
    "Exit code: 0\n--- stdout ---\n1 passed in 0.01s\n",
    "The bug is in the add function: it subtracts instead of adding. I will fix it.",
]


def build_tiny_model(target: Path, *, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3_5TextConfig

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[GLOB_CALL_TOKEN],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen3_5TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        max_position_embeddings=4096,
    )
    model = AutoModelForCausalLM.from_config(config)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def program_model(
    source: Path, target: Path, transitions: Mapping[str, str], *, default_next: str | None = None
) -> Path:
    """Copy ``source`` into a model whose next token is ``transitions[current token]``
    (tokens given as text; ``"\\n"`` etc. must each be one token)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source)

    def token_id(text: str) -> int:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, f"{text!r} is not one token: {ids}"
        return int(ids[0])

    with torch.no_grad():
        for param in model.model.layers.parameters():
            param.zero_()
        embed = model.model.embed_tokens.weight
        head = model.lm_head.weight
        d = embed.shape[1]
        head.zero_()
        if default_next is not None:
            # A constant direction shared by every embedding gives default_next a small
            # lead everywhere; programmed transitions override it by a wide margin.
            embed[:, d - 1] = 1.0
            head[token_id(default_next), d - 1] = 5.0
        for i, (current, nxt) in enumerate(transitions.items()):
            cid = token_id(current)
            embed[cid] = 0.0
            embed[cid, i] = 1.0
            hidden = model.model.norm(embed[cid].unsqueeze(0))[0]
            head[token_id(nxt)] += 40.0 * hidden / hidden.norm() ** 2
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random qwen3_5 model + tokenizer + chat template, saved with save_pretrained."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen3_5"))


@pytest.fixture(scope="session")
def programmed_model_dir(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., Path]:
    """Factory: ``programmed_model_dir(name, {"tok": "next", ...}, default_next=...)``."""
    made: dict[str, Path] = {}

    def make(name: str, transitions: Mapping[str, str], *, default_next: str | None = None) -> Path:
        if name not in made:
            made[name] = program_model(
                tiny_model_dir,
                tmp_path_factory.mktemp(name),
                transitions,
                default_next=default_next,
            )
        return made[name]

    return make
