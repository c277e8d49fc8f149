"""One `ribbit doctor` result: what was checked, how it went, and what to do next. Its own
module so checks outside the composition root (forge_doctor.py, worker/doctor.py) build
them without importing the doctor, which reaches into the web app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Check:
    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str
