"""deploy/grafana/ribbit.json queries only metrics the web app really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "ribbit.json"
_METRIC = re.compile(r"\bribbit_[a-z_]+\b")


def _exported_sample_names(client: Any, post_github: Any) -> set[str]:
    # One delivery and one request, so the labelled counter and histogram have samples.
    post_github({"zen": "Keep it logically awesome.", "hook_id": 1}, "ping", "grafana-1")
    client.get("/healthz")
    text = client.get("/metrics").get_data(as_text=True)
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples} | {
        fam.name for fam in text_string_to_metric_families(text)
    }


def test_deploy_grafana_dashboard_uses_exported_metrics(client: Any, post_github: Any) -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    assert dash["uid"] and len(panels) >= 6
    assert len({p["id"] for p in panels}) == len(panels)
    exported = _exported_sample_names(client, post_github)
    used: set[str] = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(_METRIC.findall(target["expr"]))
            assert names, target["expr"]
            used |= names
    missing = used - exported
    assert not missing, f"dashboard queries metrics the app does not export: {missing}"
    # Every metric family the app exports is on the dashboard.
    assert {
        "ribbit_webhook_events_total",
        "ribbit_jobs",
        "ribbit_http_request_duration_seconds_bucket",
    } <= used
