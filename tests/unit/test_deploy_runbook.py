"""Every alert in deploy/prometheus/alerts.yml links its section of docs/runbook.md, and
that section says what the alert means, how to check and what to do. The web app is
watched too: an alert fires when its scrape target fails and when it is gone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
RUNBOOK = REPO / "docs" / "runbook.md"
RUNBOOK_URL = re.compile(r"docs/runbook\.md#(?P<anchor>[a-z0-9-]+)")
PARTS = ("**What it means.**", "**How to check.**", "**What to do.**")


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def runbook_sections(text: str) -> dict[str, str]:
    """Each second-level section of the runbook by its anchor."""
    sections: dict[str, str] = {}
    anchor = None
    for line in text.splitlines():
        if line.startswith("## "):
            anchor = github_anchor(line[3:])
            sections[anchor] = ""
        elif anchor is not None:
            sections[anchor] += line + "\n"
    return sections


def test_github_anchor_matches_githubs_rule() -> None:
    assert github_anchor("RibbitWebDown") == "ribbitwebdown"
    assert github_anchor("What to do: now!") == "what-to-do-now"


def test_deploy_every_alert_links_its_runbook_section() -> None:
    sections = runbook_sections(RUNBOOK.read_text(encoding="utf-8"))
    rules = _rules()
    assert len(rules) >= 10
    for rule in rules:
        url = rule["annotations"].get("runbook_url", "")
        match = RUNBOOK_URL.fullmatch(url)
        assert match, f"{rule['alert']}: runbook_url {url!r} is not docs/runbook.md#<anchor>"
        anchor = match["anchor"]
        assert anchor == rule["alert"].lower(), f"{rule['alert']} links {anchor}"
        assert anchor in sections, f"{rule['alert']}: docs/runbook.md has no #{anchor}"
        missing = [part for part in PARTS if part not in sections[anchor]]
        assert not missing, f"runbook section {anchor} lacks {missing}"


def test_deploy_runbook_has_no_section_without_an_alert() -> None:
    anchors = {rule["alert"].lower() for rule in _rules()}
    assert set(runbook_sections(RUNBOOK.read_text(encoding="utf-8"))) == anchors


def test_deploy_runbook_check_fails_on_a_dangling_anchor(tmp_path: Path) -> None:
    """The check can fail: a section renamed away from its alert leaves its link dangling."""
    renamed = RUNBOOK.read_text(encoding="utf-8").replace("## RibbitWebDown", "## Web down")
    assert "ribbitwebdown" not in runbook_sections(renamed)


def test_deploy_web_app_is_watched_under_the_scrape_job_name() -> None:
    """The web alerts select the job that prometheus.yml and the Helm ServiceMonitor
    give the web app."""
    by_name = {rule["alert"]: rule for rule in _rules()}
    assert by_name["RibbitWebDown"]["expr"] == 'up{job="ribbit-web"} == 0'
    assert by_name["RibbitNoWeb"]["expr"] == 'absent(up{job="ribbit-web"} == 1)'
    scrape = yaml.safe_load((ALERTS.parent / "prometheus.yml").read_text(encoding="utf-8"))
    assert "ribbit-web" in {job["job_name"] for job in scrape["scrape_configs"]}
    monitors = (REPO / "deploy/helm/ribbit/templates/monitoring.yaml").read_text(encoding="utf-8")
    assert "{targetLabel: job, replacement: ribbit-web}" in monitors
