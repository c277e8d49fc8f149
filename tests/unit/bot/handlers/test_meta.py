"""bot/web/handlers/meta.py: deliveries about the webhook itself."""

from __future__ import annotations

from bot.web.events import Ping
from bot.web.handlers import meta, registry
from tests.unit.bot.handlers.desk import ALICE, FORGE, REPO, HandlerDesk, decided


def test_ping_is_answered_with_pong_and_no_job(desk: HandlerDesk) -> None:
    assert registry.handlers_for("ping") == [meta.pong]
    ping = Ping(forge=FORGE, repo=REPO, actor=ALICE, delivery_id="d-ping", installation_id=None)
    assert decided(desk.dispatch(ping)) == (None, "pong", 0)
    assert desk.count() == 0
