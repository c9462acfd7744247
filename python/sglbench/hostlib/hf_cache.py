"""Find a Hugging Face hub id (``org/name``) in the local Hugging Face cache, as SGLang would.

Standard library only (ships to the GPU host as ``module_utils/sglbench_hostlib/hf_cache.py``). Nothing is
ever downloaded, whatever ``HF_HUB_OFFLINE`` says: a model that is not cached is a :class:`NotCachedError`
that names the id, the revision, where it looked and how to fix it.

The lookup is huggingface_hub's own (``constants.py`` and the offline path of ``snapshot_download`` /
``hf_hub_download``, which transformers and SGLang use for a ``--model-path`` that is not a directory):

1. an existing local directory always wins: the reference is used as given;
2. cache directory: ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``,
   else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``; ``~`` and ``$VAR`` are
   expanded (against the environment given). One deliberate difference: a variable set to the empty
   string counts as unset (huggingface_hub would use a relative ``hub`` directory);
3. repo folder ``models--{org}--{name}``;
4. revision (default ``main``): a 40-hex commit hash names the snapshot directly; anything else (branch,
   tag, ``refs/pr/1``) is read from ``refs/<revision>``, which holds the commit hash;
5. the model directory is ``snapshots/<commit hash>`` (its files are symlinks into ``blobs/``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_REVISION = "main"
REPO_ID_SEPARATOR = "--"
MAX_REPO_ID_LENGTH = 96

# how a reference was resolved
LOCAL_DIR = "local-dir"  # an existing directory, used as given
AS_GIVEN = "as-given"  # neither a directory nor a hub id (e.g. a missing path): the reader reports it
HUB_REF = "hub-cache-ref"  # hub id, revision looked up in refs/<revision>
HUB_COMMIT = "hub-cache-commit"  # hub id, revision is a commit hash

CACHE_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")

_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_HUB_ID = re.compile(rf"^{_PART}/{_PART}$")
_VAR = re.compile(r"\$(\w+)|\$\{([^}]*)\}")


@dataclass(frozen=True)
class ResolvedModel:
    """Where a ``--model-path``-style reference is on this machine."""

    ref: str  # as given (hub id or path); the launch command keeps it unchanged
    path: str  # directory (or file) to read: the snapshot directory for a hub id
    how: str  # LOCAL_DIR | AS_GIVEN | HUB_REF | HUB_COMMIT
    revision: str | None = None  # hub ids only: the revision asked for (default main)
    commit_hash: str | None = None
    cache_dir: str | None = None
    cache_dir_source: str | None = None  # the variable that chose cache_dir, or "default"

    @property
    def from_hub(self) -> bool:
        return self.how in (HUB_REF, HUB_COMMIT)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line: ``org/name (revision main = commit abc...) from the Hugging Face cache <dir> (...)``."""
        if not self.from_hub:
            return self.ref
        rev = (
            f"commit {self.commit_hash}"
            if self.how == HUB_COMMIT
            else f"revision {self.revision} = commit {self.commit_hash}"
        )
        where = f"{self.cache_dir} ({_source_text(self.cache_dir_source or 'default')})"
        return f"{self.ref} ({rev}) from the Hugging Face cache {where}: {self.path}"


class NotCachedError(LookupError):
    """A hub id (at a revision) that is not in the Hugging Face cache."""

    def __init__(self, ref: str, revision: str, cache_dir: str, cache_dir_source: str, reason: str) -> None:
        self.ref = ref
        self.revision = revision
        self.cache_dir = cache_dir
        self.cache_dir_source = cache_dir_source
        self.reason = reason
        download = f"huggingface-cli download {ref}" + (
            "" if revision == DEFAULT_REVISION else f" --revision {revision}"
        )
        self.message = (
            f"{ref} (revision {revision}) is not in the Hugging Face cache: {reason}; "
            f"looked in {cache_dir} ({_source_text(cache_dir_source)}). sglbench never downloads: run "
            f"`{download}` on the host, or set HF_HOME / HF_HUB_CACHE in the config's env to the cache "
            "that holds it, or give a local directory"
        )
        super().__init__(self.message)


def _source_text(source: str) -> str:
    if source == "default":
        return "the default: " + ", ".join(CACHE_VARS) + " unset"
    return "from " + source


def looks_like_hub_id(ref: str) -> bool:
    """``org/name`` as the hub spells repo ids, and not an existing path (a local path always wins)."""
    if not _HUB_ID.match(ref) or len(ref) > MAX_REPO_ID_LENGTH:
        return False
    if REPO_ID_SEPARATOR in ref or ".." in ref or ref.endswith(".git"):
        return False
    return not os.path.exists(ref)


def is_commit_hash(revision: str) -> bool:
    return bool(_COMMIT_HASH.match(revision))


def expand(path: str, env: Mapping[str, str]) -> str:
    """``~`` then ``$VAR`` / ``${VAR}`` expanded against ``env`` (unknown variables are left as they are)."""
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        path = home + path[1:]
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), path)


def hub_cache_dir(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(cache directory, the variable that chose it or "default")`` for ``env`` (default os.environ)."""
    e = os.environ if env is None else env
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if e.get(name):
            return expand(e[name], e), name
    if e.get("HF_HOME"):
        return os.path.join(expand(e["HF_HOME"], e), "hub"), "HF_HOME"
    if e.get("XDG_CACHE_HOME"):
        return os.path.join(expand(e["XDG_CACHE_HOME"], e), "huggingface", "hub"), "XDG_CACHE_HOME"
    return os.path.join(expand("~", e), ".cache", "huggingface", "hub"), "default"


def repo_folder_name(repo_id: str) -> str:
    """``org/name`` -> ``models--org--name`` (huggingface_hub's ``repo_folder_name`` for models)."""
    return REPO_ID_SEPARATOR.join(["models", *repo_id.split("/")])


def read_ref(repo_dir: str, revision: str) -> str | None:
    """Commit hash in ``<repo_dir>/refs/<revision>``; None when there is no such ref."""
    if not revision or ".." in revision.split("/") or revision.startswith("/"):
        return None
    try:
        with open(os.path.join(repo_dir, "refs", revision), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def cached_refs(repo_dir: str) -> list[str]:
    """Revision names that have a ``refs/`` file (``main``, tags, ``refs/pr/1``), sorted."""
    root = os.path.join(repo_dir, "refs")
    found = []
    for dirpath, _dirs, files in os.walk(root):
        found += [os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/") for f in files]
    return sorted(found)


def resolve(ref: str, revision: str | None = None, env: Mapping[str, str] | None = None) -> ResolvedModel:
    """Where ``ref`` (a ``--model-path``) is: itself when local or not a hub id, else its cached snapshot.

    Raises :class:`NotCachedError` for a hub id whose revision has no snapshot in the cache.
    """
    if os.path.isdir(ref):
        return ResolvedModel(ref, ref, LOCAL_DIR)
    if not looks_like_hub_id(ref):
        return ResolvedModel(ref, ref, AS_GIVEN)
    rev = revision or DEFAULT_REVISION
    cache_dir, source = hub_cache_dir(env)
    repo_dir = os.path.join(cache_dir, repo_folder_name(ref))

    def missing(reason: str) -> NotCachedError:
        return NotCachedError(ref, rev, cache_dir, source, reason)

    if not os.path.isdir(repo_dir):
        raise missing(f"no {repo_folder_name(ref)} there")
    if is_commit_hash(rev):
        commit, how = rev, HUB_COMMIT
    else:
        commit, how = read_ref(repo_dir, rev), HUB_REF
        if commit is None:
            refs = cached_refs(repo_dir)
            have = f"cached revisions: {', '.join(refs)}" if refs else "no revision is cached"
            raise missing(f"{repo_dir} has no refs/{rev} ({have})")
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    if not os.path.isdir(snapshot):
        via = "" if how == HUB_COMMIT else f" (refs/{rev} points at it)"
        raise missing(f"{repo_dir} has no snapshots/{commit}{via}")
    return ResolvedModel(ref, snapshot, how, rev, commit, cache_dir, source)


__all__ = [
    "AS_GIVEN",
    "DEFAULT_REVISION",
    "HUB_COMMIT",
    "HUB_REF",
    "LOCAL_DIR",
    "NotCachedError",
    "ResolvedModel",
    "cached_refs",
    "expand",
    "hub_cache_dir",
    "is_commit_hash",
    "looks_like_hub_id",
    "read_ref",
    "repo_folder_name",
    "resolve",
]
