"""The served model's tokenizer, found wherever its weights are on this host.

A served job names its model as the server knows it: the model id, a promoted version's
adapter name (vLLM) or ``<base>:<version>`` (SGLang). Its tokenizer counts context as
Leaf does and decodes the sampled ids (:mod:`.decoding`), so it must be the base
model's: looked up by id in the Hugging Face cache alone, a worker whose weights came
from ``ribbit model pull`` (``<weights_dir>/<id>/``) or that runs a promoted adapter
finds nothing and counts bytes / 4. The places tried, in order:

1. the adapter's own folder, when it holds tokenizer files (the trainer saves them);
2. the adapter's base (``base_model_name_or_path`` in its ``adapter_config.json``);
3. the served name, and for ``<base>:<version>`` its base;

each as a folder, then ``<weights_dir>/<id>`` (``RIBBIT_MODEL__WEIGHTS_DIR``), then the
Hugging Face cache, from local files only (an offline worker never waits on the hub).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from worker.settings import ModelSettings
from worker.weights import WeightsError, weights_path

log = logging.getLogger(__name__)

TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")


def _places(name: str, root: Path | None) -> list[str]:
    """Where a model called ``name`` may be: a folder it names, the pulled weights, the
    Hugging Face cache id."""
    folder = Path(name)
    if folder.is_absolute() or folder.is_dir():
        return [str(folder)]
    found = []
    if root is not None:
        try:
            pulled = weights_path(root, name)
        except WeightsError:
            pulled = None
        if pulled is not None and pulled.is_dir():
            found.append(str(pulled))
    return [*found, name]


def _adapter_base(adapter: Path) -> str | None:
    try:
        config = json.loads((adapter / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    return base if isinstance(base, str) and base else None


def tokenizer_sources(model: ModelSettings) -> list[str]:
    """Every place the served model's tokenizer may be loaded from, best first."""
    root = model.weights_dir
    sources: list[str] = []
    if model.adapter_path is not None:
        adapter = Path(model.adapter_path)
        if any((adapter / name).is_file() for name in TOKENIZER_FILES):
            sources.append(str(adapter))
        base = _adapter_base(adapter)
        if base is not None:
            sources.extend(_places(base, root))
    sources.extend(_places(model.model, root))
    base_name, colon, _version = model.model.rpartition(":")
    if colon and base_name:
        sources.extend(_places(base_name, root))
    return list(dict.fromkeys(sources))


def load_served_tokenizer(model: ModelSettings) -> Any | None:
    """The first tokenizer that loads from local files, or None (bytes / 4, as Leaf's
    last fallback)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    for source in tokenizer_sources(model):
        try:
            return AutoTokenizer.from_pretrained(source, local_files_only=True)
        except Exception:  # not there, or not a tokenizer: try the next place
            log.debug("no tokenizer at %s", source)
    log.info("no local tokenizer for %s: context is counted as bytes / 4", model.model)
    return None
