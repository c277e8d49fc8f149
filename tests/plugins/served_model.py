"""A local OpenAI-compatible server that really runs a (tiny) model, answering as vLLM or
SGLang do where training depends on it: chat completions rendered with the model's own
chat template, sampled in bfloat16 (other numerics than the fp32 learner, as a real
server's kernels are), with the prompt ids, sampled ids and their log-probs in each
server's response shape (worker/agent/served_tokens.py names the fields and sources),
and the runtime LoRA API (adapters are accepted and named, not applied: at step 0 a
fresh LoRA adapter changes nothing, which is what the tests use).

``gate``: a barrier every chat request waits at before generating, so a test proves
that many requests were in flight at once without measuring time. The bf16 model costs
a few CPU seconds per answer (the agent's prompt is ~1,300 tokens): tests that need no
tokens ask for canned answers (``run_model=False``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.support import local_http

BASE = "tiny"


@dataclass
class ServedModel:
    kind: Literal["vllm", "sglang"]
    model: Any
    tokenizer: Any
    url: str = ""
    token_ids: bool = True  # False: answer as a server that ignores the token fields
    run_model: bool = True  # False: a canned answer without token ids (no model time)
    gate: threading.Barrier | None = None
    adapters: dict[str, str] = field(default_factory=dict)
    asked_for: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serves(self, name: str) -> bool:
        if name == BASE:
            return True
        if self.kind == "sglang":
            base, _, adapter = name.partition(":")
            return base == BASE and adapter in self.adapters
        return name in self.adapters

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        import torch

        messages = []
        for m in body["messages"]:
            m = dict(m)
            if m.get("tool_calls"):  # servers parse the arguments back for the template
                m["tool_calls"] = [
                    {**c, "function": {**c["function"], "arguments": json.loads(a)}}
                    if isinstance(a := c["function"]["arguments"], str)
                    else c
                    for c in m["tool_calls"]
                ]
            messages.append(m)
        kwargs = body.get("chat_template_kwargs") or {}
        text = self.tokenizer.apply_chat_template(
            messages,
            tools=body.get("tools") or None,
            add_generation_prompt=True,
            tokenize=False,
            **kwargs,
        )
        prompt: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.gate is not None:
            self.gate.wait(timeout=120)  # breaks (and the request fails) if too few arrive
        if not self.run_model:
            canned = _canned(body["model"], len(prompt))
            self.answers.append(canned)
            return canned
        eos = [self.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
        temperature = float(body.get("temperature") or 1.0)
        top_k = int(body.get("top_k") or 0)
        with self.lock, torch.inference_mode():
            ids = torch.tensor([prompt])
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=int(body["max_completion_tokens"]),
                do_sample=True,
                temperature=temperature,
                top_k=top_k,  # 0: off (not the generation_config's default)
                top_p=float(body.get("top_p") or 1.0),
                eos_token_id=eos,
                pad_token_id=eos[-1],
                return_dict_in_generate=True,
                output_scores=True,
            )
        completion: list[int] = out.sequences[0, len(prompt) :].tolist()
        # Log-probs of the distribution sampled from (vLLM --logprobs-mode
        # processed_logprobs): temperature-scaled, in the server's bfloat16.
        scores = torch.stack([s[0] for s in out.scores[: len(completion)]])
        logprobs = torch.log_softmax(scores, dim=-1).float()
        chosen = logprobs[torch.arange(len(completion)), torch.tensor(completion)].tolist()
        finish = "stop" if completion and completion[-1] in eos else "length"
        content = self.tokenizer.decode(completion, skip_special_tokens=True)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": []},
            "finish_reason": finish,
        }
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.answers)}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(completion),
                "total_tokens": len(prompt) + len(completion),
            },
        }
        if self.token_ids:
            vllm = self.kind == "vllm"
            choice["logprobs"] = {
                "content": [
                    {
                        "token": f"token_id:{t}" if vllm else self.tokenizer.decode([t]),
                        "logprob": lp,
                        "bytes": None,
                        "top_logprobs": [],
                    }
                    for t, lp in zip(completion, chosen, strict=True)
                ]
            }
            choice["token_ids"] = completion
            # vLLM puts the prompt's ids on the response, SGLang on the choice.
            (answer if vllm else choice)["prompt_token_ids"] = prompt
        self.answers.append(answer)
        return answer


def _canned(model: str, prompt_tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": "Nothing to change.", "tool_calls": []}
    return {
        "id": "chatcmpl-canned",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 4},
    }


def _handler(server: ServedModel) -> type[BaseHTTPRequestHandler]:
    admin = "/v1" if server.kind == "vllm" else ""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == f"{admin}/load_lora_adapter":
                path = Path(body["lora_path"])
                if not (path / "adapter_config.json").is_file():
                    self._reply(400, {"message": f"cannot read an adapter at {path}"})
                    return
                server.adapters[body["lora_name"]] = str(path)
                self._reply(200, {"message": "Success"})
            elif self.path == f"{admin}/unload_lora_adapter":
                found = server.adapters.pop(body["lora_name"], None)
                self._reply(200 if found else 404, {"message": "ok" if found else "unknown"})
            elif self.path == "/v1/chat/completions":
                server.asked_for.append(body["model"])
                if not server.serves(body["model"]):
                    self._reply(404, {"message": f"The model `{body['model']}` does not exist."})
                    return
                try:
                    self._reply(200, server.complete(body))
                except threading.BrokenBarrierError:
                    self._reply(500, {"message": "fewer requests in flight than the gate"})
            else:
                self._reply(404, {"message": "not found"})

    return Handler


@pytest.fixture(scope="session")
def bf16_tiny_model(tiny_model_dir: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16)
    model.eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def served_model(
    bf16_tiny_model: tuple[Any, Any],
) -> Iterator[Callable[..., ServedModel]]:
    """Start servers: ``served_model("vllm", token_ids=True, gate=None, run_model=True)``."""
    servers = ExitStack()

    def start(
        kind: Literal["vllm", "sglang"] = "vllm",
        *,
        token_ids: bool = True,
        gate: threading.Barrier | None = None,
        run_model: bool = True,
    ) -> ServedModel:
        model, tokenizer = bf16_tiny_model
        fake = ServedModel(
            kind, model, tokenizer, token_ids=token_ids, gate=gate, run_model=run_model
        )
        fake.url = f"{servers.enter_context(local_http(_handler(fake)))}/v1"
        return fake

    with servers:
        yield start
