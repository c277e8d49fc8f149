"""How the tools reach the chat template on the serving stacks the model was evaluated
with. vLLM hands the template each tool as given, ``{"type": "function", "function":
{...}}`` (``tool.model_dump()`` in its chat serving), SGLang hands it the inner
function (``item.function.model_dump()``). The Qwen3.5 / Qwen3-Coder templates accept
both (``{%- if tool.function is defined %}{%- set tool = tool.function %}``), so the
prompt is the same either way; Ribbit passes the full objects, as vLLM and Leaf do.

The template below reproduces that tool block's logic (written here, not copied) so
the test renders a real prompt from Ribbit's tools with Jinja, as transformers does."""

from __future__ import annotations

from jinja2.sandbox import ImmutableSandboxedEnvironment

from worker.agent.prompt import SYSTEM_PROMPT
from worker.agent.tools import TOOL_SCHEMAS

TOOLS_BLOCK = (
    "<|im_start|>system\n{{ system }}\n\n# Tools\n\nYou have access to the following "
    "functions:\n\n<tools>"
    "{%- for tool in tools %}"
    "{%- if tool.function is defined %}{%- set tool = tool.function %}{%- endif %}"
    "\n<function>\n<name>{{ tool.name }}</name>"
    "\n<description>{{ tool.description | trim }}</description>\n<parameters>"
    "{%- for name, field in tool.parameters.properties | items %}"
    "\n<parameter>\n<name>{{ name }}</name>\n<type>{{ field.type }}</type>"
    "\n<description>{{ field.description | trim }}</description>\n</parameter>"
    "{%- endfor %}"
    "\n<required>{{ tool.parameters.required | tojson }}</required>\n</parameters>"
    "\n</function>"
    "{%- endfor %}\n</tools><|im_end|>\n"
)


def render(tools: list[dict[str, object]]) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TOOLS_BLOCK).render(system=SYSTEM_PROMPT, tools=tools)


def test_vllm_and_sglang_tool_shapes_render_the_same_prompt() -> None:
    vllm_shape = render(TOOL_SCHEMAS)
    sglang_shape = render([tool["function"] for tool in TOOL_SCHEMAS])
    assert vllm_shape == sglang_shape
    assert "<name>Bash</name>\n<description>Run a shell command in the repository workdir." in (
        vllm_shape
    )
    assert (
        "<name>timeout</name>\n<type>number</type>\n<description>Optional timeout in seconds."
        in vllm_shape
    )
    assert vllm_shape.count("<function>") == 5
    print(vllm_shape)  # the rendered tool block, for the record (-s shows it)
