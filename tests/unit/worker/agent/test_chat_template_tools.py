"""The prompt the model's chat template renders is the same on every inference path.

In process, transformers renders the tokenizer's template with Ribbit's tools as sent.
vLLM 0.28.0 and SGLang 0.5.18 render the same way (``apply_chat_template``), each with
the tool list its own pydantic classes dump, recorded from the pinned wheels
(tests/fixtures/chat_templates/README.md), and SGLang with the template its deploy
flags give it (``--chat-template``, read back as SGLang reads the file). The template
is the published Qwen3-Coder one, vendored with its sha256; the model's own is not
public. Rendering goes through transformers on a tokenizer built here: no hub.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from worker.agent.policy.sglang_template import TOOLS_AS_SENT, main, sglang_chat_template
from worker.agent.prompt import SYSTEM_PROMPT
from worker.agent.tools import TOOL_SCHEMAS

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"
QWEN3_CODER = FIXTURES / "qwen3_coder.jinja"
QWEN3_CODER_SHA256 = "5a38bfa05833266240066aedc497decc9b00cc0d3e3b8cceea98cf530196ab06"
MESSAGES = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": "# Task\n\nThe parser drops the last line.\n"},
]
STRICT_LINE = "\n<strict>False</strict>"


def recorded(name: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())
    return tools


def render(template: str, tools: list[dict[str, Any]]) -> str:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    )
    tokenizer.chat_template = template
    text: str = tokenizer.apply_chat_template(
        MESSAGES, tools=tools, add_generation_prompt=True, tokenize=False, enable_thinking=True
    )
    return text


def chat_template_flags() -> dict[str, str | None]:
    """SGLang's ``--chat-template`` in each deploy file (None: the model's own)."""
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    helm = yaml.safe_load((ROOT / "deploy" / "helm" / "ribbit" / "values-sglang.yaml").read_text())
    argvs = {
        "compose": compose["services"]["sglang"]["command"],
        "helm": helm["inference"]["args"],
    }
    return {
        where: next((a.split("=", 1)[1] for a in argv if a.startswith("--chat-template=")), None)
        for where, argv in argvs.items()
    }


def sglang_template(model_dir: Path) -> str:
    """What SGLang 0.5.18 renders with as deployed: the model's own template without
    ``--chat-template``; with it, the file the template step writes, read as
    ``template_manager._load_jinja_template`` reads it."""
    flags = set(chat_template_flags().values())
    assert len(flags) == 1, f"compose and Helm start SGLang differently: {flags}"
    if flags == {None}:
        return (model_dir / "chat_template.jinja").read_text()
    out = model_dir.parent / "written" / "chat_template.jinja"
    assert main([str(model_dir), str(out)]) == 0
    return out.read_text().strip("\n").replace("\\n", "\n")


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "chat_template.jinja").write_bytes(QWEN3_CODER.read_bytes())
    return folder


def test_vendored_template_and_recorded_tool_lists_are_what_they_say() -> None:
    assert hashlib.sha256(QWEN3_CODER.read_bytes()).hexdigest() == QWEN3_CODER_SHA256
    # vLLM hands the template the tools exactly as sent, key order included.
    assert json.dumps(recorded("tools-vllm-0.28.0.json")) == json.dumps(TOOL_SCHEMAS)
    sglang = recorded("tools-sglang-0.5.18.json")
    assert [t["function"]["strict"] for t in sglang] == [False] * 5
    assert [t["defer_loading"] for t in sglang] == [None] * 5
    for dumped, sent in zip(sglang, TOOL_SCHEMAS, strict=True):
        assert list(dumped["function"]) == ["description", "name", "parameters", "strict"]
        assert {k: dumped["function"][k] for k in sent["function"]} == sent["function"]


def test_sglangs_tool_dump_adds_a_strict_line_per_tool_to_the_published_template() -> None:
    template = QWEN3_CODER.read_text()
    as_sent = render(template, TOOL_SCHEMAS)
    as_dumped = render(template, recorded("tools-sglang-0.5.18.json"))
    assert as_dumped != as_sent
    assert as_dumped.count(STRICT_LINE) == 5
    assert as_dumped.replace(STRICT_LINE, "") == as_sent
    assert len(as_dumped) - len(as_sent) == 115


def test_every_path_renders_the_same_prompt(model_dir: Path) -> None:
    in_process = render((model_dir / "chat_template.jinja").read_text(), TOOL_SCHEMAS)
    vllm = render(
        (model_dir / "chat_template.jinja").read_text(), recorded("tools-vllm-0.28.0.json")
    )
    sglang = render(sglang_template(model_dir), recorded("tools-sglang-0.5.18.json"))
    assert vllm == in_process
    assert sglang == in_process
    assert in_process.count("<function>") == 5
    assert STRICT_LINE not in sglang


def test_the_prefix_hands_any_template_the_tools_as_sent() -> None:
    # A template that prints its tools as JSON (Qwen3.5's does: `tool | tojson`) sees
    # every key and its order; after the prefix it sees Ribbit's tools byte for byte.
    seen = render(TOOLS_AS_SENT + "{{ tools | tojson }}", recorded("tools-sglang-0.5.18.json"))
    assert seen == json.dumps(TOOL_SCHEMAS, ensure_ascii=False)
    strict = [{**t, "function": {**t["function"], "strict": True}} for t in TOOL_SCHEMAS]
    assert render(TOOLS_AS_SENT + "{{ tools | tojson }}", strict) == json.dumps(strict)


def test_the_prefix_renders_nothing() -> None:
    assert render(TOOLS_AS_SENT, recorded("tools-sglang-0.5.18.json")) == ""


def test_the_template_step_reads_the_models_template_where_transformers_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": [{"name": "default", "template": "T"}]})
    )
    assert sglang_chat_template(tmp_path) == TOOLS_AS_SENT + "T"
    (tmp_path / "chat_template.jinja").write_text("J")
    assert sglang_chat_template(tmp_path) == TOOLS_AS_SENT + "J"
    assert main([str(tmp_path / "absent"), str(tmp_path / "out.jinja")]) == 1
