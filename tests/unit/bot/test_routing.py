"""The handler registry on its own: which handlers an event key reaches, in what order,
and how feature registries compose. Each feature's own routes are asserted in
tests/unit/bot/handlers/."""

from __future__ import annotations

from typing import Any

from bot.web.routing import Registry


def handler(name: str) -> Any:
    def run(_ctx: Any) -> None:
        return None

    run.__name__ = name
    return run


def names(handlers: list[Any]) -> list[str]:
    return [h.__name__ for h in handlers]


def test_exact_key_handlers_run_before_event_wide_ones_each_in_registration_order() -> None:
    registry = Registry()
    for key, name in [
        ("issues", "wide_1"),
        ("issues.labeled", "exact_1"),
        ("issues", "wide_2"),
        ("issues.labeled", "exact_2"),
    ]:
        registry.on(key)(handler(name))
    assert names(registry.handlers_for("issues.labeled")) == [
        "exact_1",
        "exact_2",
        "wide_1",
        "wide_2",
    ]


def test_an_action_handler_does_not_run_for_other_actions_or_the_bare_event() -> None:
    registry = Registry()
    registry.on("issues.labeled")(handler("labeled"))
    assert registry.handlers_for("issues.opened") == []
    assert registry.handlers_for("issues") == []


def test_an_event_wide_handler_runs_once_for_its_bare_key() -> None:
    registry = Registry()
    registry.on("ping")(handler("pong"))
    assert names(registry.handlers_for("ping")) == ["pong"]


def test_event_names_match_whole_not_by_prefix() -> None:
    registry = Registry()
    registry.on("issue")(handler("issue"))
    registry.on("issues.label")(handler("label"))
    registry.on("pull_request")(handler("pr"))
    assert registry.handlers_for("issues.labeled") == []
    assert registry.handlers_for("pull_request_review.submitted") == []


def test_only_the_first_dot_splits_event_from_action() -> None:
    registry = Registry()
    registry.on("a")(handler("event_a"))
    registry.on("a.b")(handler("a_b"))
    assert names(registry.handlers_for("a.b.c")) == ["event_a"]


def test_on_returns_the_handler_so_keys_stack_on_one_function() -> None:
    registry = Registry()
    fn = handler("fn")
    assert registry.on("pull_request.opened")(registry.on("pull_request.synchronize")(fn)) is fn
    assert registry.handlers_for("pull_request.opened") == [fn]
    assert registry.handlers_for("pull_request.synchronize") == [fn]


def test_composed_registry_keeps_the_children_s_order() -> None:
    issues, comments = Registry(), Registry()
    issues.on("issues.labeled")(handler("from_issues"))
    comments.on("issues.labeled")(handler("from_comments"))
    issues.on("issues")(handler("issues_wide"))
    composed = Registry(issues, comments)
    assert names(composed.handlers_for("issues.labeled")) == [
        "from_issues",
        "from_comments",
        "issues_wide",
    ]
    assert names(Registry(comments, issues).handlers_for("issues.labeled")) == [
        "from_comments",
        "from_issues",
        "issues_wide",
    ]
