from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import SettingsError, load_settings


def test_settings_defaults_are_embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path))
    s = load_settings()
    assert s.label == "ribbit"
    assert s.effective_database_url == f"sqlite:///{tmp_path / 'ribbit.db'}"
    assert s.uses_embedded_broker
    assert s.effective_broker_url.startswith("sqla+sqlite:///")


def test_settings_env_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", "s3cret")
    s = load_settings()
    assert s.sandbox.backend == "bubblewrap"
    assert s.github.webhook_secret is not None
    assert "s3cret" in s.secret_values()
    assert "s3cret" not in repr(s)


def test_settings_invalid_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "chroot")
    with pytest.raises(SettingsError, match="RIBBIT_SANDBOX__BACKEND"):
        load_settings()


def test_settings_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ribbit.yml"
    cfg.write_text("label: fixme\nagent:\n  max_turns: 7\n")
    monkeypatch.setenv("RIBBIT_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("RIBBIT_LABEL", "from-env")
    s = load_settings()
    assert s.label == "from-env"  # env beats file
    assert s.agent.max_turns == 7


def test_settings_config_file_unknown_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "ribbit.yml"
    cfg.write_text("lable: typo\n")
    monkeypatch.setenv("RIBBIT_CONFIG_FILE", str(cfg))
    with pytest.raises(SettingsError, match="lable"):
        load_settings()


def test_readme_settings_table_is_current() -> None:
    from bot.settings import settings_table

    readme = (Path(__file__).parents[3] / "README.md").read_text()
    assert settings_table() in readme, "regenerate the table: bot.settings.settings_table()"


def test_mistyped_variable_is_warned_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from bot.settings import load_settings

    monkeypatch.setenv("RIBBIT_GITHUB_WEBHOOK_SECRET", "s3cret")  # one "_" where "__" belongs
    monkeypatch.setenv("RIBBIT_ZZZZ_NOTHING_LIKE_IT", "1")
    monkeypatch.setenv("RIBBIT_GITHUB__WEBHOOK_SECRET", "fine")
    monkeypatch.setenv("RIBBIT_JUNIT", "1")  # read by scripts, not a setting: no warning
    with caplog.at_level("WARNING", logger="bot.settings"):
        load_settings(data_dir=tmp_path)
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "RIBBIT_GITHUB_WEBHOOK_SECRET is not a Ribbit setting and is ignored; "
        "did you mean RIBBIT_GITHUB__WEBHOOK_SECRET?",
        "RIBBIT_ZZZZ_NOTHING_LIKE_IT is not a Ribbit setting and is ignored",
    ]
