"""What the set-up step and the image choice write into a job's record: the same JSON,
key for key and in the same order, as before the record's parts were typed."""

from __future__ import annotations

import json

from worker.sandbox.egress_policy import BlockedRequest
from worker.sandbox.repoimage import ImageChoice, ImageRequest
from worker.sandbox.setup import SetupResult


def test_the_setup_step_writes_the_record_it_always_wrote() -> None:
    result = SetupResult(
        command="pip install -e .",
        ok=False,
        exit_code=1,
        output="error: no setup.py\n",
        duration_s=3.14159,
        network=True,
        blocked=(BlockedRequest("GET", "evil.example.com", 443, "host not on the allow-list"),),
    )
    assert json.dumps(result.to_record().to_json()) == json.dumps(
        {
            "command": "pip install -e .",
            "ok": False,
            "exit_code": 1,
            "timed_out": False,
            "duration_s": 3.142,
            "network": True,
            "blocked": ["GET evil.example.com:443 (host not on the allow-list)"],
            "restored_from": None,
            "output_tail": "error: no setup.py\n",
        }
    )


def test_the_image_choice_writes_the_record_it_always_wrote() -> None:
    choice = ImageChoice(
        image="ribbit-sandbox:latest",
        requested=ImageRequest(source=".ribbit.yml", image="python:3.12"),
        note="not on the allow-list",
    )
    assert json.dumps(choice.to_record().to_json()) == json.dumps(
        {
            "image": "ribbit-sandbox:latest",
            "requested": "image `python:3.12` (from `.ribbit.yml`)",
            "built": False,
            "note": "not on the allow-list",
        }
    )
