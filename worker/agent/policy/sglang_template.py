"""The chat template SGLang is started with: the model's own, behind a prefix that hands
it the tools as Ribbit sent them.

SGLang 0.5.18 validates each tool into its own pydantic ``Tool`` and hands the template
``item.model_dump()`` (``serving_chat.py:1089``): ``{"type", "function": {"description",
"name", "parameters", "strict": false}, "defer_loading": null}``, ``strict`` a plain
``bool`` that defaults to False, so no request can leave it out. The published
Qwen3-Coder template prints every key it does not know as a line (``<strict>False</strict>``
per tool); Qwen3.5's prints each tool as JSON (``tool | tojson``), where the key order,
``strict`` and ``defer_loading`` all show. vLLM 0.28 drops unset keys and keeps the sent
order, so it and the in-process backend hand the template the tools as sent. The prefix
rebuilds SGLang's tools in that shape; the model's template below it is unchanged.

    python -m worker.agent.policy.sglang_template MODEL_DIR OUT

writes the template for ``--chat-template=OUT`` (deploy/compose.yaml's
``sglang-chat-template`` service, the Helm chart's init container).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# No backslashes: SGLang reads a --chat-template file with `.replace("\\n", "\n")`
# (template_manager.py, _load_jinja_template). No output: every tag trims around it.
# `strict` is kept only when true (SGLang cannot tell a sent false from its default,
# and Ribbit sends none); `defer_loading` only when set, as vLLM does.
TOOLS_AS_SENT = """{#- Ribbit: the tools as sent, not as SGLang dumps them (see
    worker/agent/policy/sglang_template.py). -#}
{%- if tools is defined and tools is iterable and tools is not mapping and tools is not string %}
    {%- set ribbit = namespace(tools=[]) %}
    {%- for tool in tools %}
        {%- if tool is mapping and tool.function is defined and tool.function is mapping %}
            {%- set fn = tool.function %}
            {%- set sent = dict(name=fn.name, description=fn.description,
                                parameters=fn.parameters) %}
            {%- if fn.strict is sameas true %}
                {%- set sent = dict(sent, strict=true) %}
            {%- endif %}
            {%- if fn.defer_loading is defined and fn.defer_loading is not none %}
                {%- set sent = dict(sent, defer_loading=fn.defer_loading) %}
            {%- endif %}
            {%- set sent = dict(type=tool.type, function=sent) %}
            {%- if tool.defer_loading is defined and tool.defer_loading is not none %}
                {%- set sent = dict(sent, defer_loading=tool.defer_loading) %}
            {%- endif %}
            {%- set ribbit.tools = ribbit.tools + [sent] %}
        {%- else %}
            {%- set ribbit.tools = ribbit.tools + [tool] %}
        {%- endif %}
    {%- endfor %}
    {%- set tools = ribbit.tools %}
{%- endif %}
"""


def model_chat_template(folder: Path) -> str:
    """The template that ships with the weights, where transformers looks for it:
    ``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template`` (a
    string, or a list of named templates, of which "default")."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = folder / "tokenizer_config.json"
    found = (
        json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if config.is_file()
        else None
    )
    if isinstance(found, list):
        found = next((t.get("template") for t in found if t.get("name") == "default"), None)
    if not isinstance(found, str) or not found:
        raise LookupError(
            f"no chat template in {folder} (chat_template.jinja, tokenizer_config.json)"
        )
    return found


def sglang_chat_template(folder: Path) -> str:
    return TOOLS_AS_SENT + model_chat_template(folder)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m worker.agent.policy.sglang_template MODEL_DIR OUT", file=sys.stderr)
        return 2
    try:
        text = sglang_chat_template(Path(args[0]))
    except (LookupError, OSError, ValueError) as exc:
        print(f"sglang_template: {exc}", file=sys.stderr)
        return 1
    out = Path(args[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
