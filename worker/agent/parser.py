"""Parse one assistant completion in the Qwen3-Coder / Qwen3.5 format.

The model writes (after an optional ``<think>...</think>`` block)::

    some text
    <tool_call>
    <function=Read>
    <parameter=file_path>
    src/app.py
    </parameter>
    </function>
    </tool_call>

possibly several calls per message. This mirrors the ``qwen3_coder`` tool
parser of vLLM/SGLang (leading and trailing newline of a value stripped;
values JSON-decoded only where the tool schema declares a non-string type).

Small models break the format in every way imaginable, so nothing here
raises: a call that cannot be understood becomes a :class:`ToolCall` with
``error`` set, which the loop turns into an error observation the model can
recover from. Tolerated on purpose: a missing ``</parameter>`` (the next
``<parameter=`` or ``</function>`` ends it), a missing ``</tool_call>`` after a
complete ``</function>``, a ``<function=...>`` block without the
``<tool_call>`` wrapper, and Hermes-style JSON (``{"name":..,"arguments":..}``)
inside ``<tool_call>``. Truncated calls (text ends mid-call) are errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.store.records.trajectory import ToolCall

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

_FUNCTION_RE = re.compile(r"<function=([^>\n]*)>")
_PARAM_RE = re.compile(r"<parameter=([^>\n]*)>")
_PARAM_END_RE = re.compile(r"</parameter>|<parameter=|</function>")
_BARE_FUNCTION_RE = re.compile(r"<function=[^>\n]*>")


@dataclass(frozen=True)
class ParsedTurn:
    content: str  # text outside reasoning and well-formed calls (malformed call text stays)
    reasoning: str | None
    tool_calls: list[ToolCall]  # in order; malformed ones have ``error`` set


def split_reasoning(text: str, *, thinking_open: bool) -> tuple[str | None, str]:
    """Split ``text`` into (reasoning, rest).

    ``thinking_open``: the prompt already ended with ``<think>\\n`` (Qwen3.5's generation
    prompt in thinking mode), so the completion starts inside the reasoning block.
    """
    start = 0
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        start = len(text) - len(stripped) + len(THINK_OPEN)
        thinking_open = True
    close = text.find(THINK_CLOSE, start)
    if close >= 0:
        return text[start:close].strip(), text[close + len(THINK_CLOSE) :]
    if not thinking_open:
        return None, text
    # Reasoning never closed: keep any tool call after it usable rather than lose it.
    call = text.find(CALL_OPEN, start)
    if call < 0:
        bare = _BARE_FUNCTION_RE.search(text, start)
        call = bare.start() if bare else -1
    if call < 0:
        return text[start:].strip(), ""
    return text[start:call].strip(), text[call:]


def parse_completion(
    text: str,
    tools: Sequence[dict[str, Any]],
    *,
    thinking_open: bool = False,
    id_prefix: str = "call",
) -> ParsedTurn:
    reasoning, rest = split_reasoning(text, thinking_open=thinking_open)
    types = parameter_types(tools)
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    while True:
        start, block_end, inner, closed = _next_block(rest, pos)
        if start < 0:
            kept.append(rest[pos:])
            break
        kept.append(rest[pos:start])
        call_id = f"{id_prefix}_{len(calls)}"
        call = _parse_block(inner, closed, call_id, types)
        calls.append(call)
        if call.error is not None:
            kept.append(rest[start:block_end])  # the model sees its own broken text again
        pos = block_end
    content = "".join(kept).strip()
    return ParsedTurn(content=content, reasoning=reasoning or None, tool_calls=calls)


def _next_block(text: str, pos: int) -> tuple[int, int, str, bool]:
    """Find the next call block from ``pos``: (start, end, inner text, properly closed)."""
    wrapped = text.find(CALL_OPEN, pos)
    bare = _BARE_FUNCTION_RE.search(text, pos)
    if wrapped < 0 and bare is None:
        return -1, -1, "", False
    if wrapped >= 0 and (bare is None or wrapped <= bare.start()):
        inner_start = wrapped + len(CALL_OPEN)
        close = text.find(CALL_CLOSE, inner_start)
        nxt = text.find(CALL_OPEN, inner_start)
        if close >= 0 and (nxt < 0 or close < nxt):
            return wrapped, close + len(CALL_CLOSE), text[inner_start:close], True
        # No closing tag before the next call (or at all): end at </function> if any.
        limit = nxt if nxt >= 0 else len(text)
        fend = text.find("</function>", inner_start, limit)
        if fend >= 0:
            end = fend + len("</function>")
            return wrapped, end, text[inner_start:end], True
        return wrapped, limit, text[inner_start:limit], False
    assert bare is not None
    fend = text.find("</function>", bare.end())
    if fend >= 0:
        end = fend + len("</function>")
        return bare.start(), end, text[bare.start() : end], True
    return bare.start(), len(text), text[bare.start() :], False


def _parse_block(
    inner: str, closed: bool, call_id: str, types: dict[str, dict[str, str]]
) -> ToolCall:
    fn = _FUNCTION_RE.search(inner)
    if fn is None:
        return _parse_json_call(inner, closed, call_id)
    name = fn.group(1).strip()
    if not name:
        return ToolCall(call_id, "", {}, error="tool call has an empty function name")
    if not closed:
        return ToolCall(
            call_id,
            name,
            {},
            error=f"tool call to {name} is truncated "
            "(no </function> or </tool_call>); repeat the whole call",
        )
    body_end = inner.find("</function>", fn.end())
    body = inner[fn.end() : body_end if body_end >= 0 else len(inner)]
    arguments: dict[str, Any] = {}
    pos = 0
    while True:
        pm = _PARAM_RE.search(body, pos)
        if pm is None:
            break
        pname = pm.group(1).strip()
        end = _PARAM_END_RE.search(body, pm.end())
        stop = end.start() if end else len(body)
        value = _strip_one_newline(body[pm.end() : stop])
        arguments[pname] = _convert(value, types.get(name, {}).get(pname))
        pos = end.end() if end and end.group(0) == "</parameter>" else stop
    return ToolCall(call_id, name, arguments)


def _parse_json_call(inner: str, closed: bool, call_id: str) -> ToolCall:
    """Hermes-style ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>``."""
    text = inner.strip()
    if not text:
        return ToolCall(call_id, "", {}, error="empty <tool_call> block")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        what = "truncated" if not closed else "not in the expected format"
        return ToolCall(
            call_id,
            "",
            {},
            error=f"tool call is {what}: expected "
            "<function=NAME> with <parameter=ARG> blocks inside <tool_call>",
        )
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCall(call_id, "", {}, error="tool call JSON has no function name")
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = None
    if not isinstance(args, dict):
        return ToolCall(call_id, data["name"], {}, error="tool call arguments are not an object")
    return ToolCall(call_id, data["name"], args)


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _convert(value: str, declared: str | None) -> Any:
    """JSON-decode values whose schema type is not string; keep the raw text otherwise
    (and when decoding fails, so the tool can name the bad value)."""
    if declared is None or declared == "string":
        return value
    candidate = value.strip()
    if declared == "boolean":
        lowered = candidate.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return value
    try:
        decoded = json.loads(candidate)
    except json.JSONDecodeError:
        return value
    if declared == "integer" and isinstance(decoded, float) and decoded.is_integer():
        return int(decoded)
    return decoded


def parameter_types(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each tool's parameters and their schema types (``string`` where none is given)."""
    """Each tool's parameters and their schema types (``string`` where none is given)."""
    out: dict[str, dict[str, str]] = {}
    for tool in tools:
        fn = tool.get("function", tool)
        props = fn.get("parameters", {}).get("properties", {})
        out[fn.get("name", "")] = {
            k: v.get("type", "string") if isinstance(v.get("type"), str) else "string"
            for k, v in props.items()
        }
    return out
