"""`ribbit doctor`'s check of the quickstart's reachable address (bot/doctor.py,
public_url_check): the https address PRs send reviewers to, and its link key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.doctor import REACHABLE_STEP, SECRETS_STEP, public_url_check
from bot.settings import Settings
from tests.support import LINK_SECRET, quickstart_steps

README = Path(__file__).resolve().parents[3] / "README.md"


def _settings(**reviewer: str) -> Settings:
    return Settings(reviewer=reviewer)


def test_public_url_unset_warns_that_no_link_is_posted() -> None:
    check = public_url_check(_settings(link_secret=LINK_SECRET))
    assert (check.name, check.status) == ("public url", "warn")
    assert "RIBBIT_REVIEWER__PUBLIC_URL is not set" in check.detail
    assert REACHABLE_STEP in check.detail


@pytest.mark.parametrize("url", ["http://ribbit.example.com", "http://203.0.113.7:8080"])
def test_public_url_over_plain_http_elsewhere_warns(url: str) -> None:
    check = public_url_check(_settings(public_url=url, link_secret=LINK_SECRET))
    assert check.status == "warn" and "plain http" in check.detail and url in check.detail


def test_public_url_on_this_host_over_http_is_fine() -> None:
    # Trying Ribbit on one machine: nothing crosses a network.
    check = public_url_check(_settings(public_url="http://127.0.0.1:8080", link_secret=LINK_SECRET))
    assert check.status == "ok"


def test_public_url_without_its_link_key_warns() -> None:
    check = public_url_check(_settings(public_url="https://ribbit.example.com"))
    assert check.status == "warn" and "RIBBIT_REVIEWER__LINK_SECRET" in check.detail
    assert SECRETS_STEP in check.detail


def test_public_url_with_https_and_its_key_is_ok() -> None:
    check = public_url_check(
        _settings(public_url="https://ribbit.example.com/", link_secret=LINK_SECRET)
    )
    assert check.status == "ok"
    assert check.detail == "job pages linked at https://ribbit.example.com/review/jobs/..."


def test_the_steps_it_names_are_the_quickstarts() -> None:
    titles = {step.title.rstrip(".") for step in quickstart_steps(README.read_text())}
    assert {REACHABLE_STEP, SECRETS_STEP} <= titles


def test_doctor_shows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RIBBIT_REVIEWER__PUBLIC_URL", "http://ribbit.example.com")
    result = CliRunner().invoke(main, ["doctor"])
    [line] = [line for line in result.output.splitlines() if "public url" in line]
    assert line.startswith("[warn] public url:") and "plain http" in line
