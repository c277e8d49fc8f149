"""Policies: what turns the conversation so far into the model's next turn.

One module per backend, all behind the :class:`Policy` protocol (:mod:`.base`, with the
turn record, the errors and the context counting the loop shares):

- :mod:`.transformers_policy`: :class:`TransformersPolicy` runs the weights in-process
  (the default, and what the trainer plugs into).
- :mod:`.openai_policy`: :class:`OpenAIPolicy` talks to an OpenAI-compatible
  chat-completions server (vLLM, SGLang, llama.cpp, Ollama).
- :mod:`.fast_decode`: how the in-process backend decodes: transformers' plain path, or a
  static KV cache with a compiled decode step (``RIBBIT_MODEL__FAST_DECODE``).
- :mod:`.decoding`: the model's sampled tokens to its turn, one decoding for every
  backend (a served turn is decoded from its token ids, not the server's tool parser).
- :mod:`.served_tokenizer`: the served model's tokenizer, found where its weights are
  (``<weights_dir>/<id>``, a promoted adapter's folder or its base, the HF cache).
- :mod:`.sglang_template`: the chat template SGLang is started with, so it hands the
  model's template the tools exactly as Ribbit sent them (as vLLM and in-process do).
- :mod:`.replay_policy`: :class:`ReplayPolicy` plays back a recorded trajectory (tests,
  debugging; never the default).

:mod:`.factory` maps the ``RIBBIT_MODEL__POLICY`` name to its backend and keeps one
policy per process (:func:`load_policy`). Importing this package stays light: torch and
transformers are imported only when weights are loaded or a turn is generated.
"""

from worker.agent.policy.base import (
    AssistantTurn,
    ContextWindowExceeded,
    Policy,
    PolicyError,
    StopCheck,
    assistant_count,
    count_message_tokens,
    policy_tokenizer,
    sampling_summary,
)
from worker.agent.policy.factory import BACKENDS, PolicyFactory, load_policy, policy_factory
from worker.agent.policy.openai_policy import OpenAIPolicy
from worker.agent.policy.replay_policy import ReplayPolicy
from worker.agent.policy.transformers_policy import EOS_TOKENS, TransformersPolicy

__all__ = [
    "BACKENDS",
    "EOS_TOKENS",
    "AssistantTurn",
    "ContextWindowExceeded",
    "OpenAIPolicy",
    "Policy",
    "PolicyError",
    "PolicyFactory",
    "ReplayPolicy",
    "StopCheck",
    "TransformersPolicy",
    "assistant_count",
    "count_message_tokens",
    "load_policy",
    "policy_factory",
    "policy_tokenizer",
    "sampling_summary",
]
