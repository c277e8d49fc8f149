"""Job payloads (bot/store/payloads.py): one typed record per kind, stored in the forms
the ``jobs.instructions`` column has always held, so old rows read back the same."""

from __future__ import annotations

import json

import pytest

from bot.store.payloads import (
    CommandOrder,
    JobPayload,
    OutcomeOf,
    PayloadError,
    PersonAsks,
    UnknownWord,
    decode_payload,
    encode_payload,
)


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("solve", PersonAsks("use the helper in utils")),
        ("revise", PersonAsks("rename it back")),
        ("help", UnknownWord("fix")),
        ("command", CommandOrder("stop", "job-1")),
        ("command", CommandOrder("retry", None, "with tests this time")),
        ("command", CommandOrder("revise", "job-2")),
        ("outcome", OutcomeOf("bot")),
        ("outcome", OutcomeOf("human")),
    ],
)
def test_each_kind_round_trips(kind: str, payload: JobPayload) -> None:
    assert decode_payload(kind, encode_payload(kind, payload)) == payload


@pytest.mark.parametrize(
    ("kind", "stored", "expected"),
    [
        # What intake wrote before the typed records: every form still reads.
        ("outcome", "human", OutcomeOf("human")),
        ("outcome", "bot", OutcomeOf("bot")),
        ("command", json.dumps({"command": "stop", "target": "j1"}), CommandOrder("stop", "j1")),
        (
            "command",
            json.dumps({"command": "retry", "target": None, "text": "again"}),
            CommandOrder("retry", None, "again"),
        ),
        ("revise", "please add a test", PersonAsks("please add a test")),
        ("revise", "   ", None),
        ("solve", None, None),
        # explain never read its column: whatever was there means nothing.
        ("explain", "why did it fail", None),
    ],
)
def test_stored_forms_read_back(kind: str, stored: str | None, expected: object) -> None:
    assert decode_payload(kind, stored) == expected


@pytest.mark.parametrize(
    ("kind", "stored"),
    [
        ("command", "not json"),
        ("command", json.dumps({"command": "stop"})),
        ("command", json.dumps({"command": "rm -rf", "target": None})),
        ("command", json.dumps({"command": "stop", "target": 7})),
        ("command", json.dumps({"command": "retry", "target": None, "text": ["x"]})),
        ("command", json.dumps(["stop"])),
        ("outcome", "robot"),
    ],
)
def test_a_value_its_kind_cannot_hold_is_refused(kind: str, stored: str) -> None:
    with pytest.raises(PayloadError):
        decode_payload(kind, stored)


def test_a_payload_of_another_kind_is_not_stored() -> None:
    with pytest.raises(PayloadError, match="a solve job carries no OutcomeOf"):
        encode_payload("solve", OutcomeOf("human"))
    with pytest.raises(PayloadError):
        encode_payload("explain", PersonAsks("x"))
    assert encode_payload("explain", None) is None
