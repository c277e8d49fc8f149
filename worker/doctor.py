"""`ribbit doctor`'s worker-side checks: the sandbox backends, the model, the host it runs
on, and Semgrep. Registered in
pyproject's ribbit.doctor entry points; bot.doctor runs them after its own, handing each the
Settings it loaded (typed as bot's; the worker's sections through as_worker_settings)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.doctor_check import Check
from bot.settings import Settings
from worker.settings import as_worker_settings


def sandbox_checks(s: Settings) -> list[Check]:
    from worker.sandbox import check_backends, resolve_backend

    sandbox = as_worker_settings(s).sandbox
    found = check_backends(sandbox)
    out = [Check(f"sandbox {c.name}", "ok" if c.ok else "warn", c.detail) for c in found]
    if not any(c.ok for c in found):
        out.append(
            Check(
                "sandbox",
                "fail",
                "no sandbox backend works: install podman and "
                "build the image (deploy/sandbox/build-image.sh), or bubblewrap",
            )
        )
    else:
        out.append(Check("sandbox", "ok", f"jobs will use {resolve_backend(sandbox)}"))
    return out


def model_check(settings: Settings) -> Check:
    s = as_worker_settings(settings)
    m = s.model
    if m.policy == "replay":
        ok = m.replay_file is not None and m.replay_file.exists()
        return Check("model", "ok" if ok else "fail", f"replay {m.replay_file}")
    if m.policy == "openai":
        import requests

        resp = requests.get(m.openai_base_url.rstrip("/") + "/models", timeout=5)
        return Check(
            "model",
            "ok" if resp.ok else "fail",
            f"{m.openai_base_url} answered {resp.status_code}",
        )
    from worker.model_choice import ModelNotReady, local_weights

    try:
        ready = local_weights(m, s.effective_weights_dir)
    except ModelNotReady as exc:
        return Check("model", "fail", f"{exc.problem} Run: {exc.fix.removeprefix('run ')}")
    return Check("model", "ok", f"{m.model}: weights at {ready.model}")


def model_host_check(settings: Settings) -> list[Check]:
    """Whether this host can run the in-process model well: the GPU it would use, or on
    CPU the memory fp32 weights take and what that costs a job (README, quickstart
    step 3: measured by tests/benchmarks/bench_cpu_job.py). Nothing to say for a served
    model, a replay or a web-only install (no torch); before the weights are pulled, the
    host is judged without their size (a CPU host learns before it downloads them)."""
    s = as_worker_settings(settings)
    if s.model.policy != "transformers":
        return []
    try:
        import torch
    except ImportError:
        return []
    folder = _weights_folder(s.model.model, s.effective_weights_dir)
    # None: not pulled yet, or in the hub cache; the host is judged without the size.
    stored = checkpoint_size(folder) if folder is not None else None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return [_gpu_check(props.name, props.total_memory, stored, s.model.quantization)]
    return [_cpu_check(host_memory_bytes(), stored, s.agent.max_minutes)]


def _weights_folder(model: str, root: Path) -> Path | None:
    """The folder the setting names, or where `ribbit model pull` puts it (model_choice's
    local_weights without its checks: the model check reports those)."""
    from worker.weights import WeightsError, weights_path

    named = Path(model)
    if named.is_absolute() or named.is_dir():
        return named
    try:
        return weights_path(root, model)
    except WeightsError:
        return None


# Weights over this share of the memory leave little for the KV cache (up to 65,536
# tokens of context) and the activations.
_TIGHT = 0.9


def _gpu_check(name: str, memory: int, stored: CheckpointSize | None, quantization: str) -> Check:
    have = f"GPU {name}, {memory / 2**30:.1f} GiB"
    if quantization != "none":
        return Check("model host", "ok", f"{have}; weights {quantization}")
    if stored is None:
        return Check("model host", "ok", f"{have}; the model runs there in bf16")
    weights = f"the weights take {stored.bf16 / 2**30:.1f} GiB in bf16"
    fix = "Set RIBBIT_MODEL__QUANTIZATION=4bit or serve the model (RIBBIT_MODEL__POLICY=openai)"
    if stored.bf16 > memory:
        return Check("model host", "fail", f"{have}: {weights}. {fix}")
    if stored.bf16 > _TIGHT * memory:
        return Check(
            "model host", "warn", f"{have}: {weights}, little left for the KV cache. {fix}"
        )
    return Check("model host", "ok", f"{have}: {weights}")


def _cpu_check(memory: int, stored: CheckpointSize | None, budget_minutes: float) -> Check:
    cores = f"{os.cpu_count()} cores, {memory / 2**30:.1f} GiB of memory"
    if stored is not None and stored.fp32 > _TIGHT * memory:
        return Check(
            "model host",
            "fail",
            f"no GPU ({cores}): the model takes {stored.fp32 / 2**30:.1f} GiB in fp32 on CPU, "
            "more than this host can hold beside a job. Run workers on a GPU node or serve "
            "the model (RIBBIT_MODEL__POLICY=openai)",
        )
    weights = f", the weights {stored.fp32 / 2**30:.1f} GiB in fp32" if stored else ""
    return Check(
        "model host",
        "warn",
        f"no GPU ({cores}{weights}): the model runs on CPU at minutes a turn (README, "
        f"quickstart step 3, measured on two cores), so most jobs end at the "
        f"{budget_minutes:g}-minute agent budget. For fixes: a GPU, or "
        "RIBBIT_MODEL__POLICY=openai and a served model",
    )


@dataclass(frozen=True)
class CheckpointSize:
    """A checkpoint's weights in the two dtypes the worker loads them in
    (worker/agent/policy/transformers_policy.py: bf16 on a GPU, fp32 on CPU)."""

    parameters: int

    @property
    def bf16(self) -> int:
        return self.parameters * 2

    @property
    def fp32(self) -> int:
        return self.parameters * 4


_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def checkpoint_size(folder: Path) -> CheckpointSize | None:
    """The size of the safetensors weights in ``folder``, by the dtype its config.json
    says they are stored in (bf16 when it does not say)."""
    files = list(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    stored = sum(f.stat().st_size for f in files)
    return CheckpointSize(stored // _DTYPE_BYTES.get(str(dtype), 2))


def host_memory_bytes() -> int:
    """The memory a worker here may use: the host's, or its cgroup's limit where that is
    lower (a pod limited to 8 GiB on a 64 GiB node is killed loading 16 GiB of weights)."""
    from worker.sandbox.cgroup import memory_limit

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = memory_limit()
    return physical if limit is None else min(physical, limit)


def semgrep_check(s: Settings) -> Check:
    from worker.gates.semgrep import SemgrepError, locate_semgrep, semgrep_version

    found = locate_semgrep(as_worker_settings(s).gates.semgrep_bin)
    if found.path is None:
        return Check(
            "semgrep",
            "fail",
            f"{found.problem}: the Semgrep gate blocks every patch. Run `make install` (its "
            "own venv from deploy/semgrep.lock, beside the app's), or set "
            "RIBBIT_GATES__SEMGREP_BIN to a semgrep executable",
        )
    try:
        version = semgrep_version(found.path)
    except SemgrepError as exc:
        return Check("semgrep", "fail", f"{found.path} ({found.source}) does not run: {exc}")
    detail = f"semgrep {version} at {found.path} ({found.source})"
    if Path(found.path).parent.resolve() == (Path(sys.prefix) / "bin").resolve():
        return Check(
            "semgrep",
            "warn",
            f"{detail} is installed in the app's own venv, where its pins and the app's "
            "constrain each other: install it apart (`make install`, deploy/semgrep.lock)",
        )
    return Check("semgrep", "ok", detail)
