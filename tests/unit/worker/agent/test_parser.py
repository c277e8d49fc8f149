from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.agent.parser import parse_completion, split_reasoning
from worker.agent.tools import TOOL_SCHEMAS

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p.stem for p in CORPUS.glob("*.txt"))


@pytest.mark.parametrize("case", CASES)
def test_parser_corpus(case: str) -> None:
    text = (CORPUS / f"{case}.txt").read_text()
    expected = json.loads((CORPUS / f"{case}.json").read_text())
    parsed = parse_completion(
        text, TOOL_SCHEMAS, thinking_open=expected.get("thinking_open", False)
    )
    assert parsed.reasoning == expected["reasoning"]
    if "content" in expected:
        assert parsed.content == expected["content"]
    if "content_startswith" in expected:
        assert parsed.content.startswith(expected["content_startswith"])
    assert len(parsed.tool_calls) == len(expected["calls"])
    for got, want in zip(parsed.tool_calls, expected["calls"], strict=True):
        if "error" in want:
            assert got.error is not None and want["error"] in got.error
        else:
            assert got.error is None
            assert got.name == want["name"]
            assert got.arguments == want["arguments"]


def test_parser_call_ids_are_unique_and_prefixed() -> None:
    text = (
        "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n"
        "</tool_call>" * 3
    )
    calls = parse_completion(text, TOOL_SCHEMAS, id_prefix="call_7").tool_calls
    assert [c.id for c in calls] == ["call_7_0", "call_7_1", "call_7_2"]


def test_parser_broken_call_text_stays_visible_in_content() -> None:
    text = "Trying.\n<tool_call>\n<function=Read>\n<parameter=file_path>\nx.py"
    parsed = parse_completion(text, TOOL_SCHEMAS)
    assert "<function=Read>" in parsed.content  # the model sees what it wrote


def test_parser_reasoning_is_not_an_argument() -> None:
    text = (
        "<tool_call> inside thinking\n</think>\n<tool_call>\n<function=Glob>\n"
        "<parameter=pattern>\n*\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_completion(text, TOOL_SCHEMAS, thinking_open=True)
    assert parsed.reasoning == "<tool_call> inside thinking"
    assert [c.name for c in parsed.tool_calls] == ["Glob"]


def test_parser_types_follow_the_schema_only() -> None:
    text = (
        "<tool_call>\n<function=Write>\n<parameter=file_path>\n123\n</parameter>\n"
        "<parameter=content>\ntrue\n</parameter>\n</function>\n</tool_call>"
    )
    (call,) = parse_completion(text, TOOL_SCHEMAS).tool_calls
    assert call.arguments == {"file_path": "123", "content": "true"}  # strings stay strings


def test_split_reasoning_without_thinking() -> None:
    assert split_reasoning("plain answer", thinking_open=False) == (None, "plain answer")
