"""Environments on disk: one folder each, JSON plus a git bundle of the repository.

Layout under the root::

    envs/<instance_id>/environment.json
    envs/<instance_id>/repo.bundle     # history up to base_commit only: no fix inside
    rejected.jsonl                     # every rejected candidate, with its reason

The bundle makes an environment self-contained: a rollout or reward worker
clones it and needs no access to the original repository or forge.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from bot.hostgit import clone_at, git_ok
from bot.store.training import valid_instance_id
from trainer.envs.builder import BuildRejected
from trainer.envs.export import export_records
from trainer.envs.schema import Environment, Rejection

_BUNDLE_REF = "refs/heads/ribbit-base"


class EnvironmentFolders:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "envs").mkdir(parents=True, exist_ok=True)

    def _dir(self, instance_id: str) -> Path:
        if not valid_instance_id(instance_id):
            raise ValueError(f"{instance_id!r} is not a valid instance id")
        return self.root / "envs" / instance_id

    def add(self, env: Environment, repo_dir: Path | None = None) -> Path:
        """Store ``env`` (and, from ``repo_dir``, a bundle of its base commit's history).
        Refuses a duplicate: same id, or same base and reference patch as a stored one."""
        key = _content_key(env)
        for other in self:
            if other.instance_id == env.instance_id or _content_key(other) == key:
                raise BuildRejected(
                    Rejection(
                        candidate=env.instance_id,
                        reason="duplicate",
                        detail=f"same as {other.instance_id}",
                    )
                )
        target = self._dir(env.instance_id)
        target.mkdir(parents=True)
        if repo_dir is not None:
            _bundle(repo_dir, env.base_commit, target / "repo.bundle")
        (target / "environment.json").write_text(env.model_dump_json(indent=2), encoding="utf-8")
        return target

    def update(self, env: Environment) -> None:
        target = self._dir(env.instance_id)
        if not target.exists():
            raise KeyError(env.instance_id)
        (target / "environment.json").write_text(env.model_dump_json(indent=2), encoding="utf-8")

    def get(self, instance_id: str) -> Environment:
        path = self._dir(instance_id) / "environment.json"
        if not path.exists():
            raise KeyError(instance_id)
        return Environment.model_validate_json(path.read_text(encoding="utf-8"))

    def __iter__(self) -> Iterator[Environment]:
        for path in sorted((self.root / "envs").glob("*/environment.json")):
            yield Environment.model_validate_json(path.read_text(encoding="utf-8"))

    def select(self, selector: str = "all") -> list[Environment]:
        """``all``, ``split:<name>``, ``signal`` (calibrated with RL signal), or ids
        separated by commas."""
        envs = list(self)
        if selector == "all":
            return envs
        if selector.startswith("split:"):
            return [e for e in envs if e.split == selector.removeprefix("split:")]
        if selector == "signal":
            return [e for e in envs if e.calibration.has_signal]
        wanted = [s.strip() for s in selector.split(",") if s.strip()]
        return [self.get(i) for i in wanted]

    def checkout(self, env: Environment, dest: Path) -> Path:
        """A fresh clone of the environment's repository at its base commit."""
        bundle = self._dir(env.instance_id) / "repo.bundle"
        if not bundle.exists():
            raise FileNotFoundError(f"{env.instance_id}: no repo.bundle (imported without one?)")
        return clone_at(bundle, dest, env.base_commit, any_owner=False)

    def reject(self, rejection: Rejection) -> None:
        with (self.root / "rejected.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(rejection.model_dump_json() + "\n")

    def rejections(self) -> list[Rejection]:
        path = self.root / "rejected.jsonl"
        if not path.exists():
            return []
        return [
            Rejection.model_validate_json(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]

    # -- SWE-bench JSONL -------------------------------------------------------
    def export_jsonl(
        self, path: Path, envs: Iterable[Environment] | None = None, fmt: str = "ribbit"
    ) -> int:
        """Write environments as JSON lines in ``fmt`` (see :mod:`trainer.envs.export`):
        by default every field, SWE-bench's first; returns how many."""
        return export_records(envs if envs is not None else self, path, fmt)

    def import_jsonl(
        self, path: Path, *, forge: str | None = None
    ) -> tuple[list[str], list[Rejection]]:
        """Import SWE-bench (or Ribbit) JSONL lines; (imported ids, duplicates refused).
        Each record's forge is the operator's ``forge``, never the record's own: the forge
        decides which model line trains on it (trainer/envs/lines.py), and a file can say
        anything."""
        imported: list[str] = []
        refused: list[Rejection] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            data = json.loads(line)
            known = set(Environment.model_fields)
            env = Environment.model_validate({k: v for k, v in data.items() if k in known})
            update: dict[str, object] = {"forge": forge}
            if "provenance" not in data:
                update["source"] = "import"
            env = env.model_copy(update={"provenance": env.provenance.model_copy(update=update)})
            try:
                self.add(env)
            except BuildRejected as exc:
                refused.append(exc.rejection)
                continue
            imported.append(env.instance_id)
        return imported, refused


def _content_key(env: Environment) -> str:
    return hashlib.sha256(f"{env.repo}\0{env.base_commit}\0{env.patch}".encode()).hexdigest()


def _bundle(repo_dir: Path, base: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ribbit-bundle-") as tmp:
        clone = clone_at(repo_dir, Path(tmp) / "repo", base, any_owner=False)
        git_ok(clone, "update-ref", _BUNDLE_REF, base, any_owner=False)
        git_ok(clone, "bundle", "create", "-q", str(out.resolve()), _BUNDLE_REF, any_owner=False)
