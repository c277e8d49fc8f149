"""Why a job failed, as one record every surface renders: the status comment, the admin
and reviewer pages (markdown, or its text in a <pre>), ``ribbit jobs`` and ``ribbit
gates`` (plain text).

The record is written once, with the job's move to failed (``Job.failure``); the
one-line ``Job.failure_reason`` stays beside it as the summary a table fits. Its text
is sanitised as everything posted to a forge is (bot/forges/sanitize.py) when it is
made, so every surface shows the same characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.forges.sanitize import sanitize_forge_text

Who = Literal["maintainer", "operator"]
CONFIG_FILE = ".ribbit.yml"
# The tail a reader needs to see the error (a traceback's last frames, an installer's
# last complaint) without the log it came from.
TAIL_LINES = 15
TAIL_CHARS = 2000
REFUSED_HEADING = "The setup step's network (package registries only) refused these requests:"


@dataclass(frozen=True)
class Fixer:
    """Who can fix the failure, and where: the maintainer in ``.ribbit.yml`` (``setting``
    is its key) or the operator (``setting`` is the deployment's environment variable)."""

    who: Who
    setting: str
    advice: str  # one sentence: what to change there

    def where(self) -> str:
        if self.who == "maintainer":
            return f"`{self.setting}` in `{CONFIG_FILE}` on the default branch"
        return f"the deployment's `{self.setting}`"

    def line(self) -> str:
        return f"the {self.who}, in {self.where()}: {self.advice}"


@dataclass(frozen=True)
class FailureReason:
    what: str  # which step failed, one line
    output_tail: str = ""  # the last lines of that step's own output
    refused_hosts: tuple[str, ...] = ()  # the setup proxy's refusals, described
    fixer: Fixer | None = None  # None: nothing to change but the patch

    @classmethod
    def of(
        cls,
        what: str,
        output: str = "",
        refused_hosts: tuple[str, ...] = (),
        fixer: Fixer | None = None,
    ) -> FailureReason:
        """The record, its output cut to the tail and every text sanitised."""
        clean = sanitize_forge_text
        return cls(
            what=clean(" ".join(what.split())),
            output_tail=clean(tail(output)),
            refused_hosts=tuple(clean(h) for h in refused_hosts),
            fixer=None if fixer is None else Fixer(fixer.who, fixer.setting, clean(fixer.advice)),
        )

    # -- storage ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        fixer = self.fixer
        return {
            "what": self.what,
            "output_tail": self.output_tail,
            "refused_hosts": list(self.refused_hosts),
            "fixer": None
            if fixer is None
            else {"who": fixer.who, "setting": fixer.setting, "advice": fixer.advice},
        }

    @classmethod
    def from_json(cls, data: Any) -> FailureReason | None:
        """A stored record; None for anything that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("what"), str):
            return None
        raw = data.get("fixer")
        fixer = None
        if isinstance(raw, dict) and raw.get("who") in ("maintainer", "operator"):
            fixer = Fixer(raw["who"], str(raw.get("setting", "")), str(raw.get("advice", "")))
        hosts = data.get("refused_hosts")
        return cls(
            what=data["what"],
            output_tail=str(data.get("output_tail") or ""),
            refused_hosts=tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
            fixer=fixer,
        )

    # -- rendering --------------------------------------------------------------------------

    def to_markdown(self) -> str:
        """For the status comment and the pages."""
        parts = [self.what]
        if self.fixer is not None:
            parts.append(f"**Who can fix it:** {self.fixer.line()}")
        if self.refused_hosts:
            parts.append(
                REFUSED_HEADING + "\n\n" + "\n".join(f"- `{h}`" for h in self.refused_hosts)
            )
        if self.output_tail:
            fenced = self.output_tail.replace("```", "``\u200b`")
            parts.append(
                "<details><summary>Output (last lines)</summary>\n\n"
                f"```\n{fenced}\n```\n\n</details>"
            )
        return "\n\n".join(parts)

    def to_text(self) -> str:
        """For the CLI: the same facts, one per line, the output indented under them."""
        lines = [self.what]
        if self.fixer is not None:
            lines.append(f"who can fix it: {self.fixer.line().replace('`', '')}")
        lines += [f"refused: {h}" for h in self.refused_hosts]
        if self.output_tail:
            lines.append("output (last lines):")
            lines += [f"  | {row}" for row in self.output_tail.splitlines()]
        return "\n".join(lines)


def tail(output: str) -> str:
    """The last ``TAIL_LINES`` lines of ``output`` (trailing blank ones dropped), at
    most ``TAIL_CHARS`` characters."""
    lines = output.rstrip().splitlines()[-TAIL_LINES:]
    text = "\n".join(lines)
    return text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]
