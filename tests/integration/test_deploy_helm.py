"""The Helm chart in deploy/helm/ribbit, rendered and checked against Kubernetes' schemas.

tests/helm_render.py renders the chart's checked subset of Go templates as Helm does (Helm
itself is not installable here) and refuses anything outside it. The rendered manifests
are validated with kubernetes-validate (Kubernetes' OpenAPI schemas, offline, strict:
unknown fields fail). KEDA's ScaledObject and the Prometheus Operator's monitors are
CRDs those schemas do not include; their fields are checked by hand. `helm lint`/`helm
template` on a machine with Helm remain the authority (scripts/helm-check.sh).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm_render import (
    CHART,
    CRD_KINDS,
    NAMESPACE,
    RELEASE,
    ChartFailure,
    UnsupportedTemplate,
    chart_values,
    default_values,
    manifests,
    render,
    validate,
)
from tests.helm_render import by_name as _by_name


def _all_values() -> dict[str, Any]:
    values = default_values()
    values["keda"]["enabled"] = True
    values["trainer"]["enabled"] = True
    values["metrics"]["serviceMonitor"]["enabled"] = True
    return values


def test_deploy_helm_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "ribbit"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    assert isinstance(chart["appVersion"], str)
    # The worker's native sidecar (an init container restarted Always) needs 1.29.
    worker = (CHART / "templates" / "worker.yaml").read_text()
    assert "restartPolicy: Always" in worker and chart["kubeVersion"] == ">=1.29.0-0"


def test_deploy_helm_monitors_scrape_the_web_and_every_worker() -> None:
    assert not {d["kind"] for d in manifests(default_values())} & CRD_KINDS - {"ScaledObject"}
    docs = manifests(_all_values())
    web, worker = _by_name(docs, "ServiceMonitor", "-web"), _by_name(docs, "PodMonitor", "-worker")
    service = _by_name(docs, "Service", "-web")
    pods = _by_name(docs, "Deployment", "-worker")["spec"]["template"]
    # Each selects what serves /metrics, on the port by the name it has there.
    assert web["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in web["spec"]["endpoints"]] == [service["spec"]["ports"][0]["name"]]
    assert worker["spec"]["selector"]["matchLabels"].items() <= pods["metadata"]["labels"].items()
    ports = {p["name"] for c in pods["spec"]["containers"] for p in c.get("ports", [])}
    assert {e["port"] for e in worker["spec"]["podMetricsEndpoints"]} <= ports
    for monitor in (web, worker):
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # The job names of Compose's Prometheus, which the alert rules are written for.
    scrape = yaml.safe_load((CHART.parents[1] / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"] for job in scrape["scrape_configs"]}
    for endpoints, job in (
        (web["spec"]["endpoints"], "ribbit-web"),
        (worker["spec"]["podMetricsEndpoints"], "ribbit-worker"),
    ):
        assert [e["relabelings"] for e in endpoints] == [
            [{"targetLabel": "job", "replacement": job}]
        ]
        assert job in jobs


def test_deploy_helm_ingress_routes_every_page_a_person_is_sent_to() -> None:
    ingress = _by_name(manifests(default_values()), "Ingress", "-web")
    paths = {p["path"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    # /review: every PR body links a reviewer to /review/jobs/<id> (bot/web/review.py).
    assert paths == {"/webhooks", "/admin", "/review"}


def test_deploy_helm_default_render_is_valid_kubernetes() -> None:
    docs = manifests(default_values())
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    assert kinds == sorted(
        [
            "ConfigMap/rb-env",
            "Job/rb-db-upgrade-3",
            "Job/rb-model-pull",
            "NetworkPolicy/rb-model-pull",
            "Deployment/rb-beat",
            "Deployment/rb-web",
            "Deployment/rb-worker",
            "Ingress/rb-web",
            "NetworkPolicy/rb-restricted-egress",
            "Secret/rb-secrets",
            "Service/rb-web",
        ]
    )
    for doc in docs:
        validate(doc)


def test_deploy_helm_full_render_with_keda_and_trainer() -> None:
    docs = manifests(_all_values())
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            validate(doc)
    job = _by_name(docs, "Job", "-trainer")
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    scaled = _by_name(docs, "ScaledObject", "-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "rb-worker"
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == "ribbit"
    # KEDA's redis scaler wants every metadata value as a string.
    assert all(isinstance(v, str) for v in trigger["metadata"].values())


def test_deploy_helm_validation_catches_a_bad_value() -> None:
    import kubernetes_validate

    values = default_values()
    values["web"]["replicas"] = "two"
    web = _by_name(manifests(values), "Deployment", "-web")
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(web)


def test_deploy_helm_workers_get_gpu_and_beat_is_single() -> None:
    docs = manifests(default_values())
    worker = _by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert worker["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert worker["containers"][0]["args"][0] == "worker"
    assert worker["terminationGracePeriodSeconds"] >= 3600
    beat = _by_name(docs, "Deployment", "-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    web = _by_name(docs, "Deployment", "-web")["spec"]["template"]["spec"]
    assert web["containers"][0]["args"] == ["serve", "--no-worker"]
    for spec in (worker, web):
        assert spec["securityContext"]["runAsNonRoot"] is True
        mounts = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert "/run/secrets" in mounts
    secret = _by_name(docs, "Secret", "-secrets")
    assert set(secret["stringData"]) == {"ribbit_database_url"}
    assert set(secret["data"]) == set(GENERATED)  # no default token: generated (below)


def test_deploy_helm_network_policy_limits_worker_egress() -> None:
    docs = manifests(_all_values())
    policy = _by_name(docs, "NetworkPolicy", "-restricted-egress")["spec"]
    selector = policy["podSelector"]["matchLabels"]
    restricted = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] in ("Deployment", "Job")
        and all(
            d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in selector.items()
        )
    }
    assert restricted == {"rb-worker", "rb-beat", "rb-trainer"}
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"} and policy["ingress"] == []
    ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert ports == {6379, 5432, 53, 443, 8000}
    forge = next(r for r in policy["egress"] if r["ports"][0]["port"] == 443)
    assert all("ipBlock" in peer for peer in forge["to"])


def test_deploy_helm_worker_metrics_port_and_its_scrape_policy() -> None:
    worker = _by_name(manifests(default_values()), "Deployment", "-worker")
    container = worker["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RIBBIT_METRICS__WORKER_PORT"] == "9808"
    assert env["RIBBIT_METRICS__WORKER_HOST"] == "0.0.0.0"
    assert container["ports"] == [{"name": "metrics", "containerPort": 9808}]
    # Off by default: the workers keep taking no ingress at all.
    assert not any(
        d["metadata"]["name"].endswith("-worker-metrics") for d in manifests(default_values())
    )
    values = default_values()
    values["metrics"]["allowScrape"] = True
    docs = manifests(values)
    policy = _by_name(docs, "NetworkPolicy", "-worker-metrics")
    validate(policy)
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    [rule] = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9808}]
    assert rule["from"] == values["metrics"]["scrapeFrom"]


def test_deploy_helm_disabled_parts_render_nothing() -> None:
    values = copy.deepcopy(default_values())
    values["ingress"]["enabled"] = False
    values["networkPolicy"]["enabled"] = False
    values["secrets"]["create"] = False
    values["modelPull"]["enabled"] = False
    docs = manifests(values)
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"Ingress", "NetworkPolicy", "Secret", "ScaledObject"}
    # The schema upgrade is no optional part: every release revision has its Job.
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Job"] == ["rb-db-upgrade-3"]


def test_deploy_helm_renderer_refuses_unchecked_template_actions() -> None:
    with pytest.raises(UnsupportedTemplate):
        render('x: {{ include "ribbit.labels" . }}\n', default_values())
    with pytest.raises(UnsupportedTemplate):
        render("x: {{ .Values.nope }}\n", default_values())
    for action in ("randAscii 3", "b64enc .Values.image | toPrettyJson", "$nope", "(quote"):
        with pytest.raises(UnsupportedTemplate):
            render(f"x: {{{{ {action} }}}}\n", default_values())


# -- secrets: none shipped, strong ones generated and kept (issue #32, item 6) ----------------

GENERATED = ("ribbit_admin_token", "ribbit_github__webhook_secret")


def _secret(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _by_name(docs, "Secret", "-secrets")


def _generated(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}


def test_deploy_helm_generates_strong_secrets_when_none_are_given() -> None:
    from bot.secret_strength import secret_weakness

    secret = _secret(manifests(default_values()))
    validate(secret)
    generated = _generated(secret)
    assert set(generated) == set(GENERATED)
    for key, value in generated.items():
        assert re.fullmatch(r"[A-Za-z0-9]{48}", value), key
        assert secret_weakness(value) is None, key
    assert len(set(generated.values())) == len(GENERATED)
    # Each fresh install draws its own.
    other = _generated(_secret(manifests(default_values(), seed=1)))
    assert not set(other.values()) & set(generated.values())


def test_deploy_helm_keeps_generated_secrets_across_upgrades() -> None:
    installed = _secret(manifests(default_values(), seed=1))
    cluster = {("v1", "Secret", NAMESPACE, f"{RELEASE}-secrets"): installed}
    upgraded = _secret(manifests(default_values(), cluster=cluster, seed=2))
    assert upgraded["data"] == installed["data"]
    # A Secret of another name (another release) is not this release's.
    elsewhere = {("v1", "Secret", NAMESPACE, "other-secrets"): installed}
    assert (
        _secret(manifests(default_values(), cluster=elsewhere, seed=2))["data"]
        != (installed["data"])
    )


def test_deploy_helm_uses_the_secrets_given_and_generates_only_the_rest() -> None:
    values = default_values()
    values["secrets"]["stringData"]["ribbit_admin_token"] = "given-admin-token"
    secret = _secret(manifests(values))
    assert secret["stringData"]["ribbit_admin_token"] == "given-admin-token"
    assert set(secret["data"]) == {"ribbit_github__webhook_secret"}
    values["secrets"]["stringData"]["ribbit_github__webhook_secret"] = "given-webhook-secret"
    both = _secret(manifests(values))
    validate(both)
    assert "data" not in both


def test_deploy_helm_install_fails_without_a_database_url() -> None:
    with pytest.raises(ChartFailure, match=r"set secrets\.stringData\.ribbit_database_url"):
        manifests(chart_values())
    values = chart_values()
    values["secrets"]["create"] = False  # RELEASE-secrets managed outside Helm: no check
    assert not [d for d in manifests(values) if d["kind"] == "Secret"]


def test_deploy_helm_values_ship_no_secret() -> None:
    for name in sorted(p.name for p in CHART.glob("values*.yaml")):
        secrets = (yaml.safe_load((CHART / name).read_text()) or {}).get("secrets") or {}
        assert not secrets.get("stringData"), name


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").partition("=")[::2] for a in args if a.startswith("--"))


@pytest.mark.parametrize("overlay", ["values-vllm.yaml", "values-sglang.yaml"])
def test_deploy_helm_inference_server(overlay: str) -> None:
    docs = manifests(default_values(overlay))
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            validate(doc)
    server = _by_name(docs, "StatefulSet", "-inference")
    pod = server["spec"]["template"]["spec"]
    container = pod["containers"][0]
    flags = _flags(container["args"])
    assert flags["tool-call-parser"] == "qwen3_coder" and flags["reasoning-parser"] == "qwen3"
    assert "enable-lora" in flags
    if "vllm" in overlay:
        assert "chat-template" not in flags and "initContainers" not in pod
    else:  # the model's own template behind the prefix that hands it the tools as sent
        [step] = pod["initContainers"]
        assert step["command"][:3] == ["python", "-m", "worker.agent.policy.sglang_template"]
        assert step["command"][3] == "/models/" + flags["served-model-name"]
        assert step["command"][4] == flags["chat-template"]
        served = {m["name"]: m for m in container["volumeMounts"]}["chat-template"]
        assert served["readOnly"] is True
        assert flags["chat-template"].startswith(served["mountPath"] + "/")
        written = {m["name"]: m for m in step["volumeMounts"]}["chat-template"]
        assert written["mountPath"] == served["mountPath"] and not written.get("readOnly")
    if "vllm" in container["image"]:
        assert flags["logprobs-mode"] == "processed_logprobs"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    assert container["startupProbe"]["httpGet"]["path"] == "/v1/models"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HF_HUB_OFFLINE"] == "1"
    if "vllm" in overlay:
        assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
        assert container["command"] == ["vllm", "serve"]
    else:
        assert "sglang.launch_server" in container["command"]
    mounts = {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]}
    assert mounts["/models"] is True and mounts["/data"] is True  # adapters, read-only
    # Each replica has a stable DNS name for `ribbit model promote` to load adapters on.
    headless = _by_name(docs, "Service", "-inference-pods")
    assert headless["spec"]["clusterIP"] == "None"
    assert server["spec"]["serviceName"] == headless["metadata"]["name"]
    # Workers in, nothing out.
    policy = _by_name(docs, "NetworkPolicy", "-inference")["spec"]
    assert policy["egress"] == [] and set(policy["policyTypes"]) == {"Ingress", "Egress"}
    allowed = policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    worker = _by_name(docs, "Deployment", "-worker")["spec"]["template"]["metadata"]
    assert allowed.items() <= worker["labels"].items()
    web = _by_name(docs, "Deployment", "-web")["spec"]["template"]["metadata"]
    assert not allowed.items() <= web["labels"].items()
    # Workers are configured to ask this server, by the Service's name and port.
    config = _by_name(docs, "ConfigMap", "-env")["data"]
    service = _by_name(docs, "Service", "ribbit-inference")
    port = service["spec"]["ports"][0]["port"]
    assert config["RIBBIT_MODEL__POLICY"] == "openai"
    assert config["RIBBIT_MODEL__OPENAI_BASE_URL"] == f"http://ribbit-inference:{port}/v1"
    assert config["RIBBIT_MODEL__OPENAI_SERVER"] in overlay
    # The workers themselves then need no GPU.
    worker_pod = _by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
    worker_container = next(c for c in worker_pod["containers"] if c["name"] == "worker")
    assert "nvidia.com/gpu" not in worker_container["resources"]["limits"]
    assert not worker_pod["nodeSelector"]


def test_deploy_helm_model_pull_hook_is_the_only_way_to_the_hub() -> None:
    docs = manifests(default_values())
    job = _by_name(docs, "Job", "-model-pull")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["model", "pull", "microsoft/FrogNano-4B-2609"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HF_HUB_OFFLINE"] == "0" and env["HF_ENDPOINT"].startswith("https://")
    assert "envFrom" not in container  # the ConfigMap does not exist yet at pre-install
    labels = job["spec"]["template"]["metadata"]["labels"]
    policy = _by_name(docs, "NetworkPolicy", "-model-pull")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert _by_name(docs, "ConfigMap", "-env")["data"]["HF_HUB_OFFLINE"] == "1"
    restricted = _by_name(docs, "NetworkPolicy", "-restricted-egress")["spec"]
    assert not restricted["podSelector"]["matchLabels"].items() <= labels.items()


# -- sandboxes in the worker pod ---------------------------------------------------------------


def _worker_pod(values: dict[str, Any] | None = None) -> dict[str, Any]:
    docs = manifests(values or default_values())
    spec: dict[str, Any] = _by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
    return spec


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def _sandboxed_pod(component: str) -> dict[str, Any]:
    """The worker Deployment's pod, or the trainer Job's (its rollouts sandbox too)."""
    if component == "worker":
        return _worker_pod()
    values = default_values()
    values["trainer"]["enabled"] = True
    job = _by_name(manifests(values), "Job", "-trainer")
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("component", ["worker", "trainer"])
def test_deploy_helm_worker_pod_has_a_working_sandbox_path(component: str) -> None:
    pod = _sandboxed_pod(component)
    worker = next(c for c in pod["containers"] if c["name"] == component)
    inits = {c["name"]: c for c in pod["initContainers"]}
    engine, rootfs = inits["sandbox-engine"], inits["sandbox-rootfs"]
    assert [c["name"] for c in pod["initContainers"]] == [
        "db-check",
        "sandbox-rootfs",
        "sandbox-engine",
    ]
    # A native sidecar: started (and its socket up) before the worker, kept running.
    assert engine["restartPolicy"] == "Always"
    assert engine["startupProbe"]["exec"]["command"][:2] == ["test", "-S"]
    engine_env = {e["name"]: e["value"] for e in engine["env"]}
    worker_env = {e["name"]: e["value"] for e in worker["env"]}
    socket = engine_env["SOCKET"]
    assert engine["startupProbe"]["exec"]["command"][2] == socket
    # The worker reaches the engine at the path the engine serves, through a volume that
    # both mount at the same place and no other container does.
    assert worker_env["RIBBIT_SANDBOX__BACKEND"] == "docker"
    assert worker_env["RIBBIT_SANDBOX__DOCKER_URL"] == f"unix://{socket}"
    shared = {
        name
        for name, path in _mounts(worker).items()
        if _mounts(engine).get(name) == path and socket.startswith(path + "/")
    }
    assert len(shared) == 1
    (volume,) = (v for v in pod["volumes"] if v["name"] in shared)
    assert "emptyDir" in volume
    assert not any(shared & set(_mounts(c)) for c in pod["initContainers"] if c is not engine)
    # The socket is handed to the worker's uid; the engine imports what the worker asks for.
    assert engine_env["WORKER_UID"] == str(pod["securityContext"]["runAsUser"])
    assert engine_env["SANDBOX_IMAGE"] == worker_env["RIBBIT_SANDBOX__IMAGE"]
    # The sandbox image arrives through the kubelet and a shared export volume.
    assert rootfs["image"] == "ghcr.io/example/ribbit-sandbox:0.1.0"
    export = _mounts(rootfs)["sandbox-export"]
    assert f"{export}/rootfs.tar" in rootfs["command"]
    assert engine_env["ROOTFS"] == f"{export}/rootfs.tar"
    assert _mounts(engine)["sandbox-export"] == export
    # Only the engine holds privilege; the worker keeps none.
    assert worker["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert worker["securityContext"]["allowPrivilegeEscalation"] is False
    assert engine["securityContext"]["privileged"] is True
    assert "memory" in engine["resources"]["limits"]  # the sandboxes' cgroups live under it


def _import_changes(script: str) -> list[str]:
    import shlex

    words = shlex.split(script.replace("\\\n", " "), comments=True)
    return [words[i + 1] for i, w in enumerate(words) if w == "--change"]


def test_deploy_helm_trainer_runs_the_worker_pods_sandbox_engine_on_a_gpu_node() -> None:
    """The trainer Job's sidecar is the worker pod's, and the Job keeps its GPU placement
    where the inference overlays move the workers onto CPU nodes."""
    worker, trainer = _sandboxed_pod("worker"), _sandboxed_pod("trainer")
    sidecars = ("sandbox-rootfs", "sandbox-engine")
    assert [c for c in trainer["initContainers"] if c["name"] in sidecars] == [
        c for c in worker["initContainers"] if c["name"] in sidecars
    ]
    volumes = {v["name"]: v for v in worker["volumes"] if v["name"].startswith("sandbox-")}
    assert {v["name"]: v for v in trainer["volumes"] if v["name"] in volumes} == volumes
    for overlay in ("values-vllm.yaml", "values-sglang.yaml"):
        values = default_values(overlay)
        values["trainer"]["enabled"] = True
        docs = manifests(values)
        job = _by_name(docs, "Job", "-trainer")
        validate(job)
        pod = job["spec"]["template"]["spec"]
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
        worker_pod = _by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
        assert not worker_pod["nodeSelector"]  # the overlay's CPU workers, unlike the Job


def test_deploy_helm_sandbox_engine_imports_the_image_as_build_image_sh_does() -> None:
    build = (CHART.parents[1] / "sandbox" / "build-image.sh").read_text()
    engine = next(c for c in _worker_pod()["initContainers"] if c["name"] == "sandbox-engine")
    ours = _import_changes(engine["args"][0])
    theirs = [c for c in _import_changes(build) if "sandbox-recipe" not in c]
    assert ours == theirs and "USER 1000:1000" in ours


@pytest.mark.integration
def test_deploy_helm_sandbox_engine_script_serves_a_working_sandbox(
    tmp_path: Path, podman_socket: str, sandbox_image: str
) -> None:
    """The engine's own script, run here with Podman: it imports a root file system,
    serves the Docker API on the socket, hands it to the worker's uid, and a sandbox with
    a memory limit runs through it."""
    import os
    import signal
    import subprocess

    import docker

    from tests.plugins.sandbox import CONTAINERS_CONF
    from worker.sandbox import open_sandbox
    from worker.sandbox.common import LABEL
    from worker.settings import SandboxSettings

    engine = next(c for c in _worker_pod()["initContainers"] if c["name"] == "sandbox-engine")
    client = docker.DockerClient(base_url=podman_socket)
    local = "localhost/ribbit-sandbox-helm-test:latest"
    rootfs = tmp_path / "rootfs.tar"
    holder = client.containers.create(sandbox_image, "true")
    try:
        with rootfs.open("wb") as out:
            for chunk in holder.export():
                out.write(chunk)
    finally:
        holder.remove(force=True)
    conf = tmp_path / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    socket = tmp_path / "run" / "podman.sock"
    socket.parent.mkdir()
    env = {
        **os.environ,
        "CONTAINERS_CONF": str(conf),
        "SANDBOX_IMAGE": local,
        "ROOTFS": str(rootfs),
        "SOCKET": str(socket),
        "WORKER_UID": "10001",
    }
    proc = subprocess.Popen(
        ["sh", "-c", engine["args"][0]], env=env, cwd=tmp_path, start_new_session=True
    )
    try:
        engine_client = _wait_for_engine(f"unix://{socket}", proc)
        assert socket.stat().st_uid == 10001
        assert not rootfs.exists()  # imported, then the copy is dropped
        image = engine_client.images.get(local)
        assert image.attrs["Config"]["User"] == "1000:1000"
        settings = SandboxSettings(
            backend="docker", docker_url=f"unix://{socket}", image=local, memory_mb=128
        )
        workspace = tmp_path / "ws"
        workspace.mkdir()
        (workspace / "hello.txt").write_text("hi\n")
        with open_sandbox(settings, workspace) as sandbox:
            out = sandbox.exec("id -u && cat hello.txt", timeout=60)
            # This sandbox's own container: the engine is the host's storage, so other
            # runs' containers may be listed there too.
            own = getattr(sandbox, "container", None)
            assert own is not None
            found = engine_client.containers.list(filters={"label": LABEL, "id": own.id})
            (running,) = found
            assert running.attrs["HostConfig"]["Memory"] == 128 * 1024 * 1024  # a cgroup
        assert out.exit_code == 0 and out.stdout.split() == ["1000", "hi"], out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove(local, force=True)
        client.close()


def _wait_for_engine(url: str, proc: Any) -> Any:
    """Poll until the engine answers (or its script has died): an event, not a duration."""
    import time

    import docker

    while proc.poll() is None:
        try:
            client = docker.DockerClient(base_url=url, timeout=30)
            if client.ping():
                return client
        except docker.errors.DockerException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the engine script exited with {proc.returncode}")


def test_deploy_helm_operator_script_says_what_it_needs(tmp_path: Path) -> None:
    import subprocess

    script = CHART.parents[2] / "scripts" / "helm-check.sh"
    done = subprocess.run(
        ["/bin/bash", str(script)],
        env={"PATH": str(tmp_path)},  # no helm on this PATH (nor on these machines)
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "helm is not installed" in done.stderr


def test_deploy_helm_one_job_upgrades_the_schema_and_every_pod_waits_for_it() -> None:
    """`ribbit db upgrade` runs once per release revision; nothing else migrates
    (PostgreSQL: no auto-upgrade), so the pods that open the database check first."""
    docs = manifests(_all_values())
    job = _by_name(docs, "Job", "-db-upgrade-3")["spec"]["template"]["spec"]
    [upgrade] = job["containers"]
    assert upgrade["args"] == ["db", "upgrade"] and job["restartPolicy"] == "Never"
    assert upgrade["envFrom"] == [{"configMapRef": {"name": "rb-env"}}]
    assert {"name": "secrets", "mountPath": "/run/secrets", "readOnly": True} in upgrade[
        "volumeMounts"
    ]
    assert "RIBBIT_DATABASE_AUTO_UPGRADE" not in default_values()["env"]
    pods = {
        "web": _by_name(docs, "Deployment", "-web")["spec"]["template"]["spec"],
        "worker": _by_name(docs, "Deployment", "-worker")["spec"]["template"]["spec"],
        "trainer": _by_name(docs, "Job", "-trainer")["spec"]["template"]["spec"],
    }
    for name, pod in pods.items():
        check = pod["initContainers"][0]
        assert check["name"] == "db-check", name
        assert check["args"] == ["db", "check", "--wait", "900"], name
        assert check["image"] == pod["containers"][0]["image"], name
        assert check["envFrom"] == pod["containers"][0]["envFrom"], name
        assert "/run/secrets" in {m["mountPath"] for m in check["volumeMounts"]}, name
    beat = _by_name(docs, "Deployment", "-beat")["spec"]["template"]["spec"]
    assert "initContainers" not in beat  # beat only schedules; it never opens the database
