"""What the test gate's result means for the people reading the issue and the PR: whether
the base tree was already broken (so the patch is not to blame), which target tests
pass, and whether any test exercised the change at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.repo_config import CONFIG_PATH


@dataclass(frozen=True)
class TestVerdict:
    __test__ = False  # not a pytest class, whatever its name says

    base_broken: bool  # the tests fail at the base commit the same way as with the patch
    base_reason: str  # what failed at the base, for the message
    targets: tuple[str, ...]  # tests the patch adds or changes, or the issue names
    target_failures: tuple[str, ...]

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> TestVerdict:
        before: dict[str, Any] = details.get("before") or {}
        after: dict[str, Any] = details.get("after") or {}
        broken, reason = False, ""
        if before.get("setup_failed") and after.get("setup_failed"):
            broken, reason = True, "the setup command fails before and after the patch"
        else:
            code_before, code_after = before.get("exit_code"), after.get("exit_code")
            failing_before = set(before.get("failing") or ())
            failing_after = set(after.get("failing") or ())
            if (
                code_before not in (0, None)
                and code_after == code_before
                and failing_after <= failing_before
            ):
                broken = True
                reason = f"the test command exits {code_before} before and after the patch"
                if failing_before:
                    reason += f" ({len(failing_before)} failing test(s) at the base)"
                elif not before.get("per_test"):
                    reason += " (no test ran: collection, import or command errors?)"
        return cls(
            base_broken=broken,
            base_reason=reason,
            targets=tuple(details.get("targets") or ()),
            target_failures=tuple(details.get("target_failures") or ()),
        )

    @property
    def passing_targets(self) -> tuple[str, ...]:
        failed = set(self.target_failures)
        return tuple(t for t in self.targets if t not in failed and not any(t in f for f in failed))

    def notes_markdown(self) -> str:
        """Plain statements for the PR body and the status comment."""
        lines = []
        if self.base_broken:
            lines.append(
                f"- The base tree's tests fail too: {self.base_reason}. The repository's "
                f"test set-up looks broken, not the patch; check `setup` and `test` in "
                f"`{CONFIG_PATH}`."
            )
        if not self.targets:
            lines.append(
                "- No test exercised the change: the patch adds or changes no test, and "
                "the issue names none."
            )
        elif self.passing_targets:
            shown = ", ".join(f"`{t}`" for t in self.passing_targets[:10])
            lines.append(f"- Target tests passing with the patch: {shown}.")
        return "\n".join(lines)
