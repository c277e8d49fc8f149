"""deploy/grafana/ribbit.json: valid JSON whose every query goes through the template
variables: the data source, the job and instance of the side (web app or worker) that
exports the series, and the forge and job kind where the series carries those labels.
Which side exports what is read from the code (the web app's registry, the worker's
metrics), so a metric that moves sides fails here rather than showing nothing."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "ribbit.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
VARIABLES = {"datasource", "web_job", "worker_job", "web_instance", "worker_instance"}
VARIABLES |= {"forge", "kind"}
SELECTOR = re.compile(r"\b((?:ribbit|process)_[a-z_]+|up)\b(?:\{([^}]*)\})?")
# Exported by both sides (bot/build_info.py registers them on each registry).
BOTH = ("process_", "python_info", "ribbit_build_info")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
# Labels the board filters by, each with its variable.
FILTERED_LABELS = {"forge": 'forge=~"$forge"', "kind": 'kind=~"$kind"'}


@dataclass(frozen=True)
class Sides:
    web: frozenset[str]  # series names the web app exports
    labels: dict[str, frozenset[str]]  # metric name -> its label names (both sides)


def _label_names(metrics: object) -> dict[str, frozenset[str]]:
    found = {}
    for value in vars(metrics).values():
        names = getattr(value, "_labelnames", None)
        if names is not None:
            found[value._name] = frozenset(names)
    return found


@pytest.fixture
def sides(app: Flask) -> Sides:
    from worker.metrics import metrics as worker_metrics

    web_metrics = app.extensions["ribbit"].metrics
    web = frozenset(
        name
        for family in web_metrics.registry.collect()
        for name in {family.name, *(s.name for s in family.samples)}
    )
    return Sides(web, _label_names(web_metrics) | _label_names(worker_metrics()))


def _base(name: str) -> str:
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def _expected(name: str, sides: Sides) -> list[str]:
    # A family's own name: a histogram's or a labelled counter's samples exist only once
    # something was counted.
    family = {name, _base(name), name.removesuffix("_total")}
    if name.startswith(BOTH):
        side = ['job=~"$web_job|$worker_job"', 'instance=~"$web_instance|$worker_instance"']
    elif family & sides.web:
        side = ['job="$web_job"', 'instance=~"$web_instance"']
    else:  # the worker's, and up of the worker targets
        side = ['job="$worker_job"', 'instance=~"$worker_instance"']
    labels = set().union(*(sides.labels.get(f, frozenset()) for f in family))
    return side + [m for label, m in FILTERED_LABELS.items() if label in labels]


def problems(dashboard: dict[str, Any], sides: Sides) -> list[str]:
    """Every query that bypasses a template variable, said in a line each."""
    found = []
    text = json.dumps(dashboard)
    if "DS_PROMETHEUS" in text:
        found.append("a data source still names the import input DS_PROMETHEUS")
    for panel in dashboard["panels"]:
        if panel["datasource"] != DATASOURCE:
            found.append(f"panel {panel['title']!r}: data source {panel['datasource']}")
        for target in panel["targets"]:
            if target["datasource"] != DATASOURCE:
                found.append(f"panel {panel['title']!r}: data source {target['datasource']}")
            for name, matchers in SELECTOR.findall(target["expr"]):
                given = {m.strip() for m in matchers.split(",")}
                for wanted in _expected(name, sides):
                    if wanted not in given:
                        found.append(f"panel {panel['title']!r}: {name} lacks {wanted}")
    return found


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def test_deploy_dashboard_is_valid_json_with_unique_panels() -> None:
    dashboard = _dashboard()
    panels = dashboard["panels"]
    assert dashboard["uid"] == "ribbit-overview"
    assert len({p["id"] for p in panels}) == len(panels)
    assert all(p["targets"] for p in panels)
    assert DASHBOARD.read_text(encoding="utf-8").endswith("}\n")


def test_deploy_dashboard_declares_and_uses_every_variable() -> None:
    dashboard = _dashboard()
    declared = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(declared) == VARIABLES
    assert declared["datasource"]["type"] == "datasource"
    assert declared["datasource"]["query"] == "prometheus"
    assert declared["web_job"]["query"] == "ribbit-web"  # the rules' and the chart's job names
    assert declared["worker_job"]["query"] == "ribbit-worker"
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in declared.values() if v["type"] == "query"]
    for name, variable in declared.items():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, name
        if name != "datasource":
            assert any(f"${name}" in q for q in queries), f"${name} is declared but unused"


def test_deploy_dashboard_queries_go_through_the_variables(sides: Sides) -> None:
    assert problems(_dashboard(), sides) == []


def test_deploy_dashboard_check_fails_on_a_query_that_bypasses_them(sides: Sides) -> None:
    """The check can fail: one worker query that drops its instance filter, one webhook
    query that drops the forge filter, and a panel on a fixed data source."""
    dashboard = copy.deepcopy(_dashboard())
    by_title = {p["title"]: p for p in dashboard["panels"]}
    tokens = by_title["Model tokens per second"]["targets"][0]
    tokens["expr"] = tokens["expr"].replace(', instance=~"$worker_instance"', "", 1)
    deliveries = by_title["Webhook deliveries by outcome"]["targets"][0]
    deliveries["expr"] = deliveries["expr"].replace(', forge=~"$forge"', "")
    by_title["Queued jobs"]["datasource"] = {"type": "prometheus", "uid": "prod"}
    assert problems(dashboard, sides) == [
        "panel 'Queued jobs': data source {'type': 'prometheus', 'uid': 'prod'}",
        "panel 'Webhook deliveries by outcome': ribbit_webhook_events_total lacks "
        'forge=~"$forge"',
        "panel 'Model tokens per second': ribbit_model_tokens_total lacks "
        'instance=~"$worker_instance"',
    ]
