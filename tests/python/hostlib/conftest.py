"""Shared fixtures for the hostlib tests: a Hugging Face hub cache built in tmp_path."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest


class HubCache:
    """A Hugging Face hub cache (``HF_HUB_CACHE`` layout) laid out the way huggingface_hub writes it:
    file contents in ``blobs/<sha>``, ``snapshots/<commit>/<name>`` relative symlinks to them, and
    ``refs/<revision>`` holding the commit hash (no trailing newline)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def repo(self, repo_id: str) -> Path:
        return self.root / ("models--" + repo_id.replace("/", "--"))

    @staticmethod
    def commit(label: str) -> str:
        return hashlib.sha1(label.encode()).hexdigest()

    def add(
        self,
        repo_id: str,
        files: dict[str, bytes | str],
        *,
        revision: str | None = "main",
        commit: str | None = None,
    ) -> Path:
        """Cache ``files`` as one snapshot of ``repo_id``; ``revision`` (a ref name, or None for no
        ref) points at it. Returns the snapshot directory."""
        commit = commit or self.commit(f"{repo_id}@{revision}")
        repo = self.repo(repo_id)
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        (repo / "blobs").mkdir(exist_ok=True)
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            link = snapshot / name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
        if revision is not None:
            ref = repo / "refs" / revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit)
        return snapshot


@pytest.fixture
def hub_cache(tmp_path: Path) -> HubCache:
    root = tmp_path / "hf" / "hub"
    root.mkdir(parents=True)
    return HubCache(root)
