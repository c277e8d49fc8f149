from __future__ import annotations

import base64
import logging

import pytest

from bot.forges.redact import MASK, RedactingFilter, SecretRegistry, redact


def test_redact_masks_token_and_its_basic_auth_forms() -> None:
    token = "ghp_abcdefghijklmnop"
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    text = f"url https://x/?t={token} header Authorization: Basic {basic}"
    clean = redact(text, [token])
    assert token not in clean
    assert basic not in clean
    assert clean.count(MASK) == 2


def test_redact_ignores_empty_and_tiny_secrets() -> None:
    assert redact("a b c", ["", "a"]) == "a b c"


def test_redact_masks_longest_first() -> None:
    assert redact("tokentoken-extra", ["tokentoken", "tokentoken-extra"]) == MASK


def test_redacting_filter_masks_args_and_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    registry = SecretRegistry()
    logger = logging.getLogger("ribbit.test.filter")
    filt = RedactingFilter(registry)
    caplog.handler.addFilter(filt)
    try:
        registry.add("s3cr3t-token-minted-later")
        logger.warning("got %s", "s3cr3t-token-minted-later")
        try:
            raise RuntimeError("boom s3cr3t-token-minted-later")
        except RuntimeError:
            logger.exception("failed")
    finally:
        caplog.handler.removeFilter(filt)
    assert "s3cr3t-token-minted-later" not in caplog.text
    assert "got ***" in caplog.text
    assert "boom ***" in caplog.text
