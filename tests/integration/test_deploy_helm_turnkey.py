"""Helm that installs with nothing brought (issue #36 item 5): the image push script, adapter
servers derived from the inference replica count, the evaluation Redis and PostgreSQL,
the claims the chart makes, and values-one-gpu-node.yaml rendered as written.

The chart is rendered by tests/helm_render.py and validated against Kubernetes' schemas,
as in test_deploy_helm.py.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm_render import (
    CHART,
    CRD_KINDS,
    NAMESPACE,
    RELEASE,
    UnsupportedTemplate,
    by_name,
    chart_values,
    default_values,
    kube_version_floor,
    kube_versions,
    manifests,
    render,
    validate,
)

ROOT = CHART.parents[2]
ONE_GPU_NODE = "values-one-gpu-node.yaml"


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each workload's pod template, by the workload's name."""
    return {
        d["metadata"]["name"]: d["spec"]["template"]
        for d in docs
        if d["kind"] in ("Deployment", "StatefulSet", "Job")
    }


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return {**data, **(secret.get("stringData") or {})}


# -- scripts/push-images.sh ------------------------------------------------------------------

FAKE_ENGINE = """#!/bin/sh
# Records each call, its arguments tab-separated on one line; builds and pushes nothing.
for arg in "$@"; do printf '%s\\t' "$arg"; done >> "$ENGINE_LOG"
echo >> "$ENGINE_LOG"
echo "engine output that must stay off stdout"
"""


def _push(tmp_path: Path, engine: str | None, *args: str) -> tuple[str, list[list[str]], int]:
    """Run the script on a PATH holding only what it uses and a fake ``engine`` (none:
    no engine at all), so the machine's own podman is never found."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("dirname", "sed", "git"):
        found = shutil.which(tool)
        assert found, tool
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    if engine:
        fake = bin_dir / engine
        fake.write_text(FAKE_ENGINE)
        fake.chmod(0o755)
    log = tmp_path / "engine.log"
    done = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "push-images.sh"), *args],
        env={"PATH": str(bin_dir), "ENGINE_LOG": str(log), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = log.read_text().splitlines() if log.exists() else []
    calls = [line.split("\t")[:-1] for line in lines]
    return done.stdout, calls, done.returncode


def _set_values(stdout: str) -> dict[str, Any]:
    """The printed `--set key=value` flags, applied to values.yaml as Helm applies them."""
    values = chart_values()
    words = shlex.split(stdout)
    assert words[::2] == ["--set"] * (len(words) // 2), stdout
    for flag in words[1::2]:
        key, _, value = flag.partition("=")
        node = values
        *parents, leaf = key.split(".")
        for part in parents:
            node = node[part]
        assert leaf in node, f"{key} is no key of the chart's values"
        node[leaf] = value
    return values


def _images(values: dict[str, Any]) -> set[str]:
    values["secrets"]["stringData"]["ribbit_database_url"] = "postgresql+psycopg://u:p@h/d"
    values["trainer"]["enabled"] = True
    return {
        c["image"]
        for pod in _pods(manifests(values)).values()
        for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]
    }


def test_push_images_builds_and_pushes_the_three_images_the_chart_names(tmp_path: Path) -> None:
    stdout, calls, rc = _push(tmp_path, "podman", "registry.example.com/team/", "1.4.2")
    assert rc == 0
    app = "registry.example.com/team/ribbit:1.4.2"
    gpu = "registry.example.com/team/ribbit:1.4.2-gpu"
    sandbox = "registry.example.com/team/ribbit-sandbox:1.4.2"
    builds = [c for c in calls if c[0] == "build"]
    pushes = [c for c in calls if c[0] == "push"]
    assert [c[0] for c in calls] == ["build"] * 3 + ["push"] * 3  # every build before a push
    assert pushes == [["push", app], ["push", gpu], ["push", sandbox]]
    tagged = {c[c.index("-t") + 1]: c for c in builds}
    assert set(tagged) == {app, gpu, sandbox}
    assert tagged[app][-1] == str(ROOT) and "TORCH_VARIANT=cu126" not in tagged[app]
    assert tagged[app][tagged[app].index("-f") + 1] == str(ROOT / "deploy" / "Dockerfile")
    # The GPU image as Compose's GPU services build it.
    assert "TORCH_VARIANT=cu126" in tagged[gpu] and "RIBBIT_EXTRAS=postgres,gpu" in tagged[gpu]
    assert tagged[sandbox][-1] == str(ROOT / "deploy" / "sandbox")
    # ribbit_build_info's commit, which the image cannot ask a checkout for.
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"RIBBIT_COMMIT={head}" in tagged[app] and f"RIBBIT_COMMIT={head}" in tagged[gpu]
    # Stdout is the values alone, and they point every pod of ours at what was pushed.
    values = _set_values(stdout)
    ours = {i for i in _images(values) if "registry.example.com" in i}
    assert ours == {app, gpu, sandbox}
    assert not {i for i in _images(values) if "ghcr.io/example" in i}


def test_push_images_defaults_to_the_chart_tag_and_prints_alone(tmp_path: Path) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    stdout, calls, rc = _push(tmp_path, "podman", "--print", "reg.local:5000")
    assert rc == 0 and calls == []  # --print builds and pushes nothing
    values = _set_values(stdout)
    assert values["image"]["tag"] == app_version
    assert values["gpuImage"]["tag"] == f"{app_version}-gpu"
    assert values["sandbox"]["image"] == f"reg.local:5000/ribbit-sandbox:{app_version}"


def test_push_images_uses_docker_where_podman_is_missing(tmp_path: Path) -> None:
    _, calls, rc = _push(tmp_path, "docker", "reg.local")
    assert rc == 0 and [c[0] for c in calls] == ["build"] * 3 + ["push"] * 3


def test_push_images_refuses_without_a_registry_or_an_engine(tmp_path: Path) -> None:
    stdout, calls, rc = _push(tmp_path, "podman")
    assert rc == 2 and not stdout and calls == []
    bare = tmp_path / "bare"
    bare.mkdir()
    stdout, _, rc = _push(bare, None, "reg.local")
    assert rc == 1 and not stdout


# -- adapter servers from the replica count ---------------------------------------------------


@pytest.mark.parametrize("overlay", ["values-vllm.yaml", "values-sglang.yaml"])
@pytest.mark.parametrize("replicas", [1, 3])
def test_adapter_servers_name_every_inference_replica(
    overlay: str, replicas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.model_choice import adapter_servers
    from worker.settings import load_worker_settings

    values = default_values(overlay)
    values["inference"]["replicas"] = replicas
    docs = manifests(values)
    config = by_name(docs, "ConfigMap", "-env")
    validate(config)
    server = by_name(docs, "StatefulSet", "-inference")
    headless = by_name(docs, "Service", "-inference-pods")
    assert server["spec"]["replicas"] == replicas
    # Pod i of a StatefulSet is NAME-i, reachable as NAME-i.<its serviceName>.
    name, subdomain = server["metadata"]["name"], server["spec"]["serviceName"]
    assert subdomain == headless["metadata"]["name"] and headless["spec"]["clusterIP"] == "None"
    port = headless["spec"]["ports"][0]["port"]
    expected = [f"http://{name}-{i}.{subdomain}:{port}/v1" for i in range(replicas)]
    # Read back the way every Ribbit process reads its environment.
    for key, value in config["data"].items():
        monkeypatch.setenv(key, value)
    settings = load_worker_settings()
    assert settings.model.adapter_servers == expected
    assert [s.base_url for s in adapter_servers(settings.model)] == expected


def test_adapter_servers_given_by_hand_win_and_none_without_a_server() -> None:
    values = default_values("values-vllm.yaml")
    values["env"]["RIBBIT_MODEL__ADAPTER_SERVERS"] = '["http://elsewhere:8000/v1"]'
    data = by_name(manifests(values), "ConfigMap", "-env")["data"]
    assert data["RIBBIT_MODEL__ADAPTER_SERVERS"] == '["http://elsewhere:8000/v1"]'
    plain = by_name(manifests(default_values()), "ConfigMap", "-env")["data"]
    assert "RIBBIT_MODEL__ADAPTER_SERVERS" not in plain


def test_renderer_ranges_as_helm_does() -> None:
    template = (
        "{{- $xs := list }}\n{{- range $i := until 3 }}\n{{- $xs = append $xs $i }}\n{{- end }}\n"
        "x: {{ toJson $xs | quote }}\n"
    )
    assert render(template, {}) == '\nx: "[0,1,2]"\n'  # the newline after {{- end }} stays
    # Inside range `.` is the element: a chart reading .Values there breaks under Helm.
    with pytest.raises(UnsupportedTemplate):
        render("{{ range $i := until 2 }}{{ .Values.x }}{{ end }}", {"x": 1})
    with pytest.raises(UnsupportedTemplate):
        render("{{ range .Values.xs }}{{ end }}", {"xs": [1]})


# -- evaluation Redis and PostgreSQL ---------------------------------------------------------


def _evaluation_values() -> dict[str, Any]:
    values = chart_values()  # no database URL given: the chart makes one
    values["redis"]["enabled"] = True
    values["postgresql"]["enabled"] = True
    return values


def test_evaluation_databases_are_off_by_default() -> None:
    docs = manifests(default_values())
    assert not [d for d in docs if d["metadata"]["labels"]["app.kubernetes.io/name"] != "ribbit"]
    assert not [d for d in docs if d["kind"] in ("StatefulSet", "PersistentVolumeClaim")]


def test_evaluation_redis_and_postgresql_serve_what_ribbit_is_told() -> None:
    from sqlalchemy.engine import make_url

    values = _evaluation_values()
    docs = manifests(values)
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            validate(doc)
    redis = by_name(docs, "Service", "ribbit-redis")
    broker = by_name(docs, "ConfigMap", "-env")["data"]["RIBBIT_BROKER_URL"]
    assert broker == f"redis://{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}/0"
    secrets = _decoded(by_name(docs, "Secret", "-secrets"))
    url = make_url(secrets["ribbit_database_url"])
    postgres = by_name(docs, "Service", "ribbit-postgres")
    assert url.host == postgres["metadata"]["name"] and (url.port or 5432) == 5432
    assert postgres["spec"]["ports"][0]["port"] == 5432
    # The server's password is the URL's, from the same Secret.
    pod = by_name(docs, "StatefulSet", "-postgresql")["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    ref = env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == f"{RELEASE}-secrets"
    assert secrets[ref["key"]] == url.password and len(url.password or "") == 48
    assert (env["POSTGRES_USER"]["value"], env["POSTGRES_DB"]["value"]) == (
        url.username,
        url.database,
    )
    # The schema upgrade waits for the server it upgrades to accept connections.
    upgrade = by_name(docs, "Job", "-db-upgrade-3")["spec"]["template"]["spec"]
    [wait] = upgrade["initContainers"]
    assert "pg_isready" in wait["command"][-1] and "-p 5432" in wait["command"][-1]
    assert {"name": "PGHOST", "value": url.host} in wait["env"]
    assert (
        "initContainers"
        not in by_name(manifests(default_values()), "Job", "-db-upgrade-3")["spec"]["template"][
            "spec"
        ]
    )
    for service in (redis, postgres):  # each Service selects its StatefulSet's pods
        kind = service["metadata"]["labels"]["app.kubernetes.io/name"]
        labels = by_name(docs, "StatefulSet", f"-{kind}")["spec"]["template"]["metadata"]
        assert service["spec"]["selector"].items() <= labels["labels"].items()


def test_evaluation_databases_are_reachable_through_the_network_policies() -> None:
    docs = manifests(_evaluation_values())
    restricted = by_name(docs, "NetworkPolicy", "-restricted-egress")["spec"]["egress"]
    pods = _pods(docs)
    for kind in ("redis", "postgresql"):
        labels = pods[f"{RELEASE}-{kind}"]["metadata"]["labels"]
        # Workers, beat and the trainer may go out to it...
        assert any(
            peer.get("podSelector", {}).get("matchLabels", {}).items() <= labels.items()
            and "namespaceSelector" not in peer
            for rule in restricted
            for peer in rule["to"]
        ), kind
        # ...and it lets in every pod of this release that opens it (web, jobs, workers).
        [rule] = by_name(docs, "NetworkPolicy", f"{RELEASE}-{kind}")["spec"]["ingress"]
        allowed = rule["from"][0]["podSelector"]["matchLabels"]
        users = [p for name, p in pods.items() if not name.endswith(("-redis", "-postgresql"))]
        assert users and all(allowed.items() <= p["metadata"]["labels"].items() for p in users)


def test_evaluation_database_secret_is_kept_across_upgrades() -> None:
    installed = by_name(manifests(_evaluation_values(), seed=1), "Secret", "-secrets")
    cluster = {("v1", "Secret", NAMESPACE, f"{RELEASE}-secrets"): installed}
    upgraded = by_name(manifests(_evaluation_values(), cluster, seed=2), "Secret", "-secrets")
    assert upgraded["data"] == installed["data"]
    assert {"postgres_password", "ribbit_database_url"} <= set(installed["data"])


def test_a_given_database_url_is_not_replaced() -> None:
    values = _evaluation_values()
    values["secrets"]["stringData"]["ribbit_database_url"] = "postgresql+psycopg://a:b@db/x"
    secret = by_name(manifests(values), "Secret", "-secrets")
    assert "ribbit_database_url" not in secret["data"]
    assert _decoded(secret)["ribbit_database_url"] == "postgresql+psycopg://a:b@db/x"


def test_notes_warn_that_the_databases_are_for_evaluation() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "EVALUATION" not in render(notes, default_values())
    shown = render(notes, _evaluation_values())
    assert shown.count("FOR EVALUATION ONLY") == 2
    values_file = (CHART / "values.yaml").read_text()
    assert "FOR EVALUATION ONLY" in values_file and "ReadWriteMany" in values_file


# -- the claims, and one GPU node as written -------------------------------------------------


def test_claims_are_made_before_the_model_pull_hook_and_only_when_missing() -> None:
    values = default_values()
    values["persistence"]["create"] = True
    docs = manifests(values)
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    assert set(claims) == {values["persistence"]["dataClaim"], values["persistence"]["modelsClaim"]}
    pull = by_name(docs, "Job", "-model-pull")["metadata"]["annotations"]
    for claim in claims.values():
        validate(claim)
        notes = claim["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == pull["helm.sh/hook"]
        assert int(notes["helm.sh/hook-weight"]) < int(pull["helm.sh/hook-weight"])
        # before-hook-creation (Helm's default) would delete the data on the next upgrade.
        assert "before-hook-creation" not in notes["helm.sh/hook-delete-policy"]
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    existing = {
        ("v1", "PersistentVolumeClaim", NAMESPACE, name): claim for name, claim in claims.items()
    }
    assert not [d for d in manifests(values, existing) if d["kind"] == "PersistentVolumeClaim"]


def test_one_gpu_node_values_render_and_validate_as_written() -> None:
    docs = manifests(chart_values(ONE_GPU_NODE))  # nothing --set: not even a database URL
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            validate(doc)
    pods = _pods(docs)
    # Every claim a pod mounts is made by the chart (StatefulSets make their own).
    made = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for pod in pods.values()
        for v in pod["spec"].get("volumes", [])
        if "persistentVolumeClaim" in v
    }
    assert mounted and mounted <= made
    # One GPU, the worker's, and nothing pins pods to a label a single node may lack.
    gpus = {
        name: int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
        for name, pod in pods.items()
        for c in pod["spec"]["containers"]
    }
    assert {n: g for n, g in gpus.items() if g} == {f"{RELEASE}-worker": 1}
    assert by_name(docs, "Deployment", "-worker")["spec"]["replicas"] == 1
    assert all(not pod["spec"].get("nodeSelector") for pod in pods.values())
    # The broker and the database are the chart's own, and every secret is generated.
    assert {f"{RELEASE}-redis", f"{RELEASE}-postgresql"} <= set(pods)
    secrets = _decoded(by_name(docs, "Secret", "-secrets"))
    assert {"ribbit_database_url", "ribbit_admin_token", "ribbit_github__webhook_secret"} <= set(
        secrets
    )
    assert not (yaml.safe_load((CHART / ONE_GPU_NODE).read_text()).get("secrets") or {})


def test_one_gpu_node_values_say_how_to_install_them() -> None:
    header = (CHART / ONE_GPU_NODE).read_text().split("\n\n")[0]
    assert f"-f deploy/helm/ribbit/{ONE_GPU_NODE}" in header
    assert "scripts/push-images.sh --print" in header
    assert os.access(ROOT / "scripts" / "push-images.sh", os.X_OK)


# -- the one-GPU node opened to the forges, and watched ---------------------------------------


def _one_gpu_node_opened() -> dict[str, Any]:
    """values-one-gpu-node.yaml with what its header says to set for webhooks (the
    Ingress with its host and TLS secret) and the Prometheus Operator's monitors on."""
    values = chart_values(ONE_GPU_NODE)
    values["ingress"].update(enabled=True, host="ribbit.example.com", tlsSecret="ribbit-tls")
    values["metrics"]["serviceMonitor"]["enabled"] = True
    values["metrics"]["allowScrape"] = True
    return values


def test_one_gpu_node_opened_to_the_forges_renders_valid_at_every_claimed_version() -> None:
    header = (CHART / ONE_GPU_NODE).read_text().split("\n\n")[0]
    assert "ingress.enabled=true, ingress.host and ingress.tlsSecret" in " ".join(header.split())
    docs = manifests(_one_gpu_node_opened())
    floor, newest = kube_versions()
    assert floor == "1.29.0"  # the worker's native sidecar (restartPolicy: Always)
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            validate(doc, (floor, newest))
    ingress = by_name(docs, "Ingress", "-web")
    service = by_name(docs, "Service", "-web")
    routes = {
        p["path"]: p["backend"]["service"]
        for rule in ingress["spec"]["rules"]
        for p in rule["http"]["paths"]
    }
    # /review: the page every draft PR's body sends its reviewer to.
    assert set(routes) == {"/webhooks", "/admin", "/review"}
    ports = {p["name"] for p in service["spec"]["ports"]}
    for backend in routes.values():
        assert backend["name"] == service["metadata"]["name"] and backend["port"]["name"] in ports
    assert ingress["spec"]["tls"] == [{"hosts": ["ribbit.example.com"], "secretName": "ribbit-tls"}]
    monitor = by_name(docs, "ServiceMonitor", "-web")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert by_name(docs, "PodMonitor", "-worker")


def test_kube_version_floor_is_what_the_worker_needs() -> None:
    # The worker's native sidecar (an init container with restartPolicy: Always) is an
    # unknown field in 1.27's schema; 1.28 has it behind an alpha feature gate, off by
    # default, and 1.29 turns it on: so the floor is 1.29, and validating at the floor
    # (kube_versions) fails the day kubeVersion drops below what the schema knows.
    import kubernetes_validate

    worker = by_name(manifests(chart_values(ONE_GPU_NODE)), "Deployment", "-worker")
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicy"):
        validate(worker, ("1.27.0",))
    assert tuple(int(n) for n in kube_version_floor().split(".")) >= (1, 29, 0)
    validate(worker, (kube_version_floor(),))
