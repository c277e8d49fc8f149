"""Model versions on the inference-server path, against a local OpenAI-compatible server
that behaves like vLLM or SGLang where Ribbit depends on it: named adapters loaded and
unloaded at run time (vLLM ``/v1/load_lora_adapter``, SGLang ``/load_lora_adapter``),
requests that name an adapter (vLLM: its name; SGLang: ``base:adapter``), an error for a
name it does not serve, and adapters forgotten on restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.store.db import Database
from tests.support import local_http, score_heldout
from trainer import registry
from worker.agent.policy import OpenAIPolicy, load_policy
from worker.model_choice import ModelNotReady, preflight
from worker.settings import AgentSettings, ModelSettings, WorkerSettings

pytestmark = pytest.mark.integration
BASE = "frognano"


@dataclass
class FakeServer:
    kind: Literal["vllm", "sglang"]
    url: str = ""
    adapters: dict[str, str] = field(default_factory=dict)
    asked_for: list[str] = field(default_factory=list)
    starts: int = 1

    def restart(self) -> None:
        self.adapters.clear()  # runtime-loaded adapters do not survive a restart
        self.starts += 1

    def serves(self, model: str) -> bool:
        if model == BASE:
            return True
        if self.kind == "sglang":
            base, _, adapter = model.partition(":")
            return base == BASE and adapter in self.adapters
        return model in self.adapters


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
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

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                ids = [BASE, *server.adapters]
                self._reply(200, {"object": "list", "data": [{"id": i} for i in ids]})
            else:
                self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == f"{admin}/load_lora_adapter":
                name, path = body["lora_name"], body["lora_path"]
                if name in server.adapters:
                    self._reply(
                        400, {"message": f"The lora adapter '{name}' has already been loaded."}
                    )
                elif not (Path(path) / "adapter_config.json").is_file():
                    self._reply(400, {"message": f"cannot read an adapter at {path}"})
                else:
                    server.adapters[name] = path
                    self._reply(200, {"message": f"Success: LoRA adapter '{name}' added"})
            elif self.path == f"{admin}/unload_lora_adapter":
                found = server.adapters.pop(body["lora_name"], None)
                self._reply(200 if found else 404, {"message": "ok" if found else "unknown"})
            elif self.path == "/v1/chat/completions":
                model = body["model"]
                server.asked_for.append(model)
                if not server.serves(model):
                    self._reply(404, {"message": f"The model `{model}` does not exist."})
                    return
                message = {"role": "assistant", "content": f"answered by {model}"}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._reply(200, {"choices": [choice], "usage": {}})
            else:
                self._reply(404, {"message": "not found"})

    return Handler


@pytest.fixture(params=["vllm", "sglang"])
def inference_server(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    fake = FakeServer(request.param)
    with local_http(_handler(fake)) as url:
        fake.url = f"{url}/v1"
        yield fake


def _adapter(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "runs" / name / "adapter"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"r": 2}')
    return folder


def _worker_asks(db: Database, settings: WorkerSettings, server: FakeServer) -> str:
    """What a job's policy requests from the server, through the job's own pre-flight."""
    model = preflight(db, settings)
    policy = load_policy(model, AgentSettings())
    assert isinstance(policy, OpenAIPolicy)
    turn = policy.generate([{"role": "user", "content": "hi"}], [])
    assert turn.content == f"answered by {server.asked_for[-1]}"
    return server.asked_for[-1]


def test_served_versions_follow_promotion_and_rollback(
    inference_server: FakeServer, tmp_path: Path
) -> None:
    server = inference_server
    env = {
        "RIBBIT_DATA_DIR": str(tmp_path / "data"),
        "RIBBIT_MODEL__POLICY": "openai",
        "RIBBIT_MODEL__MODEL": BASE,
        "RIBBIT_MODEL__OPENAI_BASE_URL": server.url,
        "RIBBIT_MODEL__OPENAI_SERVER": server.kind,
        "RIBBIT_MODEL__OPENAI_MAX_RETRIES": "0",
    }
    settings = WorkerSettings(
        data_dir=tmp_path / "data",
        model=ModelSettings(
            policy="openai",
            model=BASE,
            openai_base_url=server.url,
            openai_server=server.kind,
            openai_max_retries=0,
        ),
    )
    db = Database(settings.effective_database_url)
    db.migrate()
    v1, v2 = _adapter(tmp_path, "v1"), _adapter(tmp_path, "v2")
    registry.register(db, "v1", base_model=BASE, adapter_path=str(v1), heldout_pass_rate=0.4)
    registry.register(db, "v2", base_model=BASE, adapter_path=str(v2), heldout_pass_rate=0.5)
    # Per-environment results that make v1 beat the base and v2 beat v1 (#33).
    score_heldout(db, f"base:{BASE}", [0] * 40)
    score_heldout(db, "v1", [1] * 20 + [0] * 20)
    score_heldout(db, "v2", [1] * 32 + [0] * 8)
    name = (lambda v: v) if server.kind == "vllm" else (lambda v: f"{BASE}:{v}")
    cli = CliRunner()

    assert _worker_asks(db, settings, server) == BASE  # nothing promoted: the base

    out = cli.invoke(main, ["model", "promote", "v1"], env=env)
    assert out.exit_code == 0, out.output
    assert server.adapters == {"v1": str(v1)}  # loaded before any worker asks for it
    assert _worker_asks(db, settings, server) == name("v1")

    out = cli.invoke(main, ["model", "promote", "v2"], env=env)
    assert out.exit_code == 0, out.output
    assert _worker_asks(db, settings, server) == name("v2")

    out = cli.invoke(main, ["model", "rollback"], env=env)
    assert out.exit_code == 0 and "now serving v1" in out.output, out.output
    assert _worker_asks(db, settings, server) == name("v1")
    assert set(server.adapters) == {"v1"} and server.starts == 1  # no restart

    server.restart()  # the worker re-loads the promoted adapter before its next job
    assert _worker_asks(db, settings, server) == name("v1")
    assert set(server.adapters) == {"v1"}

    out = cli.invoke(main, ["model", "rollback"], env=env)
    assert out.exit_code == 0 and "base model" in out.output, out.output
    assert _worker_asks(db, settings, server) == BASE
    db.dispose()


def test_served_version_the_server_cannot_load_is_not_promoted(
    inference_server: FakeServer, tmp_path: Path
) -> None:
    server = inference_server
    env = {
        "RIBBIT_DATA_DIR": str(tmp_path / "data"),
        "RIBBIT_MODEL__POLICY": "openai",
        "RIBBIT_MODEL__MODEL": BASE,
        "RIBBIT_MODEL__OPENAI_BASE_URL": server.url,
        "RIBBIT_MODEL__OPENAI_SERVER": server.kind,
    }
    settings = WorkerSettings(
        data_dir=tmp_path / "data",
        model=ModelSettings(
            policy="openai", model=BASE, openai_base_url=server.url, openai_server=server.kind
        ),
    )
    db = Database(settings.effective_database_url)
    db.migrate()
    missing = tmp_path / "not-readable-by-the-server"
    registry.register(db, "v9", base_model=BASE, adapter_path=str(missing), heldout_pass_rate=1)
    out = CliRunner().invoke(main, ["model", "promote", "v9", "--force"], env=env)
    assert out.exit_code != 0 and "refused to load v9" in out.output, out.output
    assert registry.promoted_model(db) is None  # workers keep asking for what is served
    # Forced into the registry anyway, a job fails before its agent, saying what to do.
    registry.promote(db, "v9", force=True)
    with pytest.raises(ModelNotReady) as info:
        preflight(db, settings)
    assert "ribbit model rollback" in info.value.for_issue()
    db.dispose()
