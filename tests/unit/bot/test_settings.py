from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import Settings, SettingsError, load_settings
from tests.support import GITHUB_SECRET
from worker.settings import WorkerSettings, as_worker_settings, load_worker_settings


def test_settings_defaults_are_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    s = load_settings()
    assert s.label == "ribbit"
    assert s.effective_database_url == f"sqlite:///{tmp_path / 'ribbit.db'}"
    assert s.uses_embedded_broker
    assert s.effective_broker_url.startswith("sqla+sqlite:///")


def test_settings_env_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", GITHUB_SECRET)
    s = load_worker_settings()
    assert s.sandbox.backend == "bubblewrap"
    assert s.github.webhook_secret is not None
    assert GITHUB_SECRET in s.secret_values()
    assert GITHUB_SECRET not in repr(s)


def test_settings_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "chroot")
    with pytest.raises(SettingsError, match="RIBBIT_SANDBOX__BACKEND"):
        load_worker_settings()


def test_settings_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ribbit.yml"
    cfg.write_text("label: fixme\nagent:\n  max_turns: 7\n")
    monkeypatch.setenv("RIBBIT_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("RIBBIT_LABEL", "from-env")
    s = load_worker_settings()
    assert s.label == "from-env"  # env beats file
    assert s.agent.max_turns == 7


def test_settings_config_file_unknown_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ribbit.yml"
    cfg.write_text("lable: typo\n")
    monkeypatch.setenv("RIBBIT_CONFIG_FILE", str(cfg))
    with pytest.raises(SettingsError, match="lable"):
        load_settings()


def test_readme_settings_table_is_current() -> None:
    from bot.settings_variables import settings_table

    readme = (Path(__file__).parents[3] / "README.md").read_text()
    table = settings_table(WorkerSettings)
    assert table in readme, (
        "regenerate: bot.settings_variables.settings_table(worker.settings.WorkerSettings)"
    )


def test_mistyped_variable_is_warned_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from bot.settings import load_settings

    monkeypatch.setenv("RIBBIT_GITHUB_WEBHOOK_SECRET", "s3cret")  # one "_" where "__" belongs
    monkeypatch.setenv("RIBBIT_ZZZZ_NOTHING_LIKE_IT", "1")
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", GITHUB_SECRET)
    monkeypatch.setenv("RIBBIT_JUNIT", "1")  # read by scripts, not a setting: no warning
    monkeypatch.setenv("RIBBIT_DEBUG", "1")  # read by the `ribbit` command itself
    monkeypatch.setenv("RIBBIT_EMBEDDED_PARENT", "4242")  # ribbit serve's children
    with caplog.at_level("WARNING", logger="bot.settings"):
        load_settings(data_dir=tmp_path)
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "RIBBIT_GITHUB_WEBHOOK_SECRET is not a Ribbit setting and is ignored; "
        "did you mean RIBBIT_GITHUB__WEBHOOK_SECRET?",
        "RIBBIT_ZZZZ_NOTHING_LIKE_IT is not a Ribbit setting and is ignored",
    ]


def test_web_settings_have_no_worker_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The web tier's Settings neither hold nor validate the worker's sections ...
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "chroot")
    web = load_settings(data_dir=tmp_path)
    assert not {"sandbox", "model", "agent", "gates"} & set(type(web).model_fields)
    assert web.effective_job_time_limit_s is None and web.configured_model is None
    # ... and WorkerSettings add them under the same variables and defaults.
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    worker = load_worker_settings(data_dir=tmp_path)
    assert isinstance(worker, Settings)
    assert worker.sandbox.backend == "bubblewrap"
    assert worker.configured_model == "microsoft/FrogNano-4B-2609"


def test_worker_variables_are_known_where_worker_settings_are_built(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # The known variables are those of the class built: `ribbit` processes build
    # WorkerSettings (bot/cli.py), so the worker's are no typos there.
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    monkeypatch.setenv("RIBBIT_AGENT_MAX_TURNS", "3")  # one "_" where "__" belongs
    with caplog.at_level("WARNING", logger="bot.settings"):
        load_worker_settings(data_dir=tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        "RIBBIT_AGENT_MAX_TURNS is not a Ribbit setting and is ignored; "
        "did you mean RIBBIT_AGENT__MAX_TURNS?"
    ]


def test_config_file_worker_sections_need_worker_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "ribbit.yml"
    cfg.write_text("gates:\n  test_timeout_s: 60\n")
    monkeypatch.setenv("RIBBIT_CONFIG_FILE", str(cfg))
    assert load_worker_settings().gates.test_timeout_s == 60
    with pytest.raises(SettingsError, match="unknown settings gates"):
        load_settings()


def test_as_worker_settings_keeps_what_bot_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = load_worker_settings(data_dir=tmp_path)
    assert as_worker_settings(built) is built
    # Bot's Settings alone (a test, a library caller): same values, the worker's sections
    # from the environment.
    monkeypatch.setenv("RIBBIT_AGENT__MAX_TURNS", "9")
    web = load_settings(data_dir=tmp_path, label="fixme", github={"webhook_secret": GITHUB_SECRET})
    worker = as_worker_settings(web)
    assert (worker.data_dir, worker.label, worker.agent.max_turns) == (tmp_path, "fixme", 9)
    assert GITHUB_SECRET in worker.secret_values()


def test_web_tier_reads_no_worker_section(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from bot.queue import broker_transport_options
    from bot.web.admin.overview import _model_version

    redis = "redis://localhost:6379/0"
    web = load_settings(data_dir=tmp_path, broker_url=redis)
    worker = load_worker_settings(data_dir=tmp_path, broker_url=redis)
    # Only a consumer needs the visibility timeout, and only WorkerSettings know the budgets.
    assert broker_transport_options(web) == {}
    limit = worker.effective_job_time_limit_s
    assert broker_transport_options(worker) == {"visibility_timeout": limit + 600}
    no_registry = "(configured; no model registry in this process)"
    shown = _model_version(SimpleNamespace(settings=web, model_versions=None))  # type: ignore[arg-type]
    assert shown == f"unknown model {no_registry}"
    shown = _model_version(SimpleNamespace(settings=worker, model_versions=None))  # type: ignore[arg-type]
    assert shown == f"microsoft/FrogNano-4B-2609 {no_registry}"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RIBBIT_GITHUB__WEBHOOK_SECRET", ""),
        ("RIBBIT_GITLAB__WEBHOOK_TOKEN", "   "),
        ("RIBBIT_GITHUB__TOKEN", ""),
        ("RIBBIT_GITLAB__TOKEN", ""),
    ],
)
def test_an_empty_secret_is_unset_not_a_key_anyone_can_sign_with(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    from bot.web.webhooks import configured_forges

    monkeypatch.setenv(variable, value)
    settings = load_settings()
    assert settings.github.webhook_secret is None and settings.github.token is None
    assert settings.gitlab.webhook_token is None and settings.gitlab.token is None
    # Unset, the endpoint answers 503 and start-up says so (never open, never 401-by-luck).
    assert configured_forges(settings) == {"github": False, "gitlab": False}
