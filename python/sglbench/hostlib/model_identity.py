"""Identity of a model directory on the GPU host: what a benchmark result depends on, cheaply.

Stdlib only; ships to the host as ``ansible.module_utils.sglbench_hostlib.model_identity`` (used by the
``sglbench_plan`` module, which already reads the same directories). Per directory: sha256 of
``config.json``, of ``generation_config.json`` and of the safetensors index (when present), and the
names and sizes of the weight files (no weight bytes are read: a re-downloaded or re-quantised
checkpoint changes sizes or the index). A Hugging Face hub id (``org/name``) that is not a local
directory is identified by its cached snapshot (``hostlib/hf_cache.py``, in the Hugging Face cache of the
unit's environment) plus ``hub: {id, revision, commit_hash}``; one that is not cached by its name only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from . import hf_cache

HASHED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "tokenizer_config.json",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
MODEL_FLAGS = ("--model-path", "--model")
DRAFT_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model")
REVISION_FLAGS = ("--revision",)
DRAFT_REVISION_FLAGS = ("--speculative-draft-model-revision",)


def _sha256_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def directory_identity(path: str) -> dict[str, Any]:
    """``{path, local, files: {name: sha256}, weights: {count, bytes, sha256 of name:size list}}``."""
    if not os.path.isdir(path):
        return {"path": path, "local": False, "files": {}, "weights": None}
    files = {}
    for name in HASHED_FILES:
        digest = _sha256_file(os.path.join(path, name))
        if digest is not None:
            files[name] = digest
    sizes = []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        names = []
    for name in names:
        if name.endswith(WEIGHT_SUFFIXES):
            try:
                sizes.append(f"{name}:{os.stat(os.path.join(path, name)).st_size}")
            except OSError:
                continue
    listing = "\n".join(sizes)
    weights = {
        "count": len(sizes),
        "bytes": sum(int(s.rsplit(":", 1)[1]) for s in sizes),
        "sha256": hashlib.sha256(listing.encode("utf-8")).hexdigest(),
    }
    return {"path": path, "local": True, "files": files, "weights": weights}


def flag_value(argv: list[str], flags: tuple[str, ...]) -> str | None:
    """Value of the first of ``flags`` in ``argv`` (``--flag V`` or ``--flag=V``); the last one wins."""
    found = None
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(flag + "="):
                found = arg.split("=", 1)[1]
    return found


def model_identity(
    ref: str, revision: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """:func:`directory_identity` of a model path; a cached hub id's is its snapshot's, with ``path`` the id
    and ``hub: {id, revision, commit_hash}``.

    Anything else (a local directory, a missing path, a hub id that is not cached) gives exactly
    ``directory_identity(ref)``, as before hub ids were resolved, so those attempt hashes do not change.
    """
    try:
        resolved = hf_cache.resolve(ref, revision, env)
    except hf_cache.NotCachedError:
        return directory_identity(ref)  # not on the host: its name (argv, also hashed, has the revision)
    if not resolved.from_hub:
        return directory_identity(ref)
    ident = directory_identity(resolved.path)
    ident["path"] = ref
    ident["hub"] = {"id": ref, "revision": resolved.revision, "commit_hash": resolved.commit_hash}
    return ident


def models_identity(argv: list[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"model": identity, "draft": identity or None}`` of an SGLang launch command line.

    ``env``: the server's environment, for the Hugging Face cache of hub ids (default ``os.environ``).
    """
    model = flag_value(argv, MODEL_FLAGS)
    draft = flag_value(argv, DRAFT_FLAGS)
    return {
        "model": model_identity(model, flag_value(argv, REVISION_FLAGS), env) if model else None,
        "draft": model_identity(draft, flag_value(argv, DRAFT_REVISION_FLAGS), env) if draft else None,
    }
