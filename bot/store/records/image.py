"""The sandbox image's part of a job's record (``sandbox_image``): which image the job's
sandboxes ran and why, as the worker's :class:`worker.sandbox.repoimage.ImageChoice`
chose it (``ImageChoice.to_record``). Keys are written in the order the worker always
wrote them; keys this version does not know are kept in ``extra`` and written back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.store.tolerant import opt_bool, opt_str

_KEYS = ("image", "requested", "built", "note")


@dataclass(frozen=True)
class ImageRecord:
    """The image a job's sandboxes ran, as the job's record keeps it."""

    image: str
    requested: str | None  # what the repository asked for, described; None: nothing
    built: bool  # built for this job (False: reused, named, or the deployment's)
    note: str | None  # why the request did not apply (said on the issue and in the PR)
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer version, kept

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "requested": self.requested,
            "built": self.built,
            "note": self.note,
            **self.extra,
        }

    @classmethod
    def from_json(cls, data: Any) -> ImageRecord | None:
        """None when ``data`` is not an image record this code can read whole: the
        caller keeps such a value as it was stored."""
        if not isinstance(data, dict) or not all(k in data for k in _KEYS):
            return None
        image, built = opt_str(data["image"]), opt_bool(data["built"])
        requested, note = data["requested"], data["note"]
        if (
            image is None
            or built is None
            or (requested is not None and opt_str(requested) is None)
            or (note is not None and opt_str(note) is None)
        ):
            return None
        return cls(
            image=image,
            requested=requested,
            built=built,
            note=note,
            extra={k: v for k, v in data.items() if k not in _KEYS},
        )
