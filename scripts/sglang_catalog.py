#!/usr/bin/env python3
"""Generate the per-release SGLang launch-flag catalog from the released wheels themselves.

For each SGLang release in RELEASES this downloads the wheel (``pip download --no-deps``), unpacks it
into a cache directory outside the repo, and builds that release's own ``launch_server`` argument
parser by running the release's code (``prepare_server_args``/``ServerArgs.add_cli_args``) in a fresh
interpreter of a scratch virtualenv. The wheel's heavy dependencies (torch, triton, transformers, ...)
are not installed: an import hook stubs only the wheel's own declared dependencies (mapped to import
names) and a short list of known transitive ones. The parser's actions are written as plain JSON to
``python/sglbench/hostlib/sglang_catalogs/<release>.json``; renames between consecutive releases go
to ``renames.json``. Where a release's parser cannot be built by running it, its ``add_argument``
calls are read with ``ast`` instead and the catalog says ``"method": "ast"``.

Usage::

    scripts/sglang_catalog.py 0.5.24        # (add 0.5.24 to RELEASES) generate it, regenerate renames
    scripts/sglang_catalog.py --all         # regenerate every listed release
    scripts/sglang_catalog.py --check       # regenerate into a temp dir, diff with the committed files

This script imports only the standard library at module level: its worker half runs inside the
scratch virtualenv, and its pure helpers are imported by tests/scripts/test_sglang_catalog_data.py.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parent.parent / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package (also inside the scratch venv's worker)
    sys.path.insert(0, _PYTHON_SRC)

# The catalog file format (schema ids, actions, the writers) is the loader's.
from sglbench.hostlib.sglang_catalog import ACTIONS as ALLOWED_ACTIONS  # noqa: E402, F401 - for the tests
from sglbench.hostlib.sglang_catalog import (  # noqa: E402
    RENAMES_SCHEMA,  # noqa: F401 - re-exported for the tests
    SCHEMA,
    render_catalog,
    render_renames,
)

# One conversion from an argparse parser to catalog entries, shared with the GPU host's dump.
from sglbench.hostlib.sglang_parser_dump import (  # noqa: E402
    ARGPARSE_ACTIONS,  # noqa: F401 - re-exported for the tests
    _json_ok,
    capture_parser,
    catalog_flags,
    map_action,  # noqa: F401 - re-exported for the tests
    normalize_flag,  # noqa: F401 - re-exported for the tests
)
from sglbench.hostlib.sglang_parser_dump import describe_action as _describe_action  # noqa: E402

# --------------------------------------------------------------------------------------------------
# Data: the releases catalogued, and renames confirmed by reading both wheels' source.
# --------------------------------------------------------------------------------------------------

RELEASES: list[str] = [
    "0.4.10",
    "0.4.10.post2",
    "0.5.2",
    "0.5.6",
    "0.5.6.post2",
    "0.5.10",
    "0.5.10.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.15",
    "0.5.15.post1",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
]

# Renames confirmed by reading the source of both wheels. ``old``/``new`` are option strings; the
# release fields are filled from the catalogs (``first_with_new`` = first catalogued release that
# has ``new``, ``last_with_old`` = the catalogued release before it).
CURATED_RENAMES: list[dict[str, str]] = [
    {
        "old": "--mamba-scheduler-strategy",
        "new": "--mamba-radix-cache-strategy",
        "evidence": (
            "read sglang/srt/server_args.py of 0.5.13.post1 (add_argument('--mamba-scheduler-strategy', "
            "choices=MAMBA_SCHEDULER_STRATEGY_CHOICES)) and of 0.5.14 (field mamba_radix_cache_strategy; "
            "'--mamba-scheduler-strategy' re-declared with DeprecatedAliasStoreAction, "
            "dest='mamba_radix_cache_strategy', new_flag='--mamba-radix-cache-strategy'); the alias is gone"
            " from sglang/srt/server_args.py in 0.5.20"
        ),
    },
    {
        "old": "--cuda-graph-max-bs",
        "new": "--cuda-graph-max-bs-decode",
        "evidence": (
            "read sglang/srt/server_args.py of 0.5.13.post1 (add_argument('--cuda-graph-max-bs', type=int))"
            " and of 0.5.14 (field cuda_graph_max_bs_decode; '--cuda-graph-max-bs' re-declared with "
            "DeprecatedAliasStoreAction, dest='cuda_graph_max_bs_decode', "
            "new_flag='--cuda-graph-max-bs-decode'); the alias is gone from sglang/srt/server_args.py in "
            "0.5.20"
        ),
    },
    {
        "old": "--speculative-dflash-draft-window-size",
        "new": "--speculative-draft-window-size",
        "evidence": (
            "read sglang/srt/server_args.py of 0.5.11 "
            "(add_argument('--speculative-dflash-draft-window-size', type=int), DFLASH only) and of 0.5.12 "
            "(add_argument('--speculative-draft-window-size', '--speculative-dflash-draft-window-size', "
            "type=int, dest='speculative_draft_window_size'), honoured by EAGLE-3 and DFLASH); the second "
            "spelling is gone from sglang/srt/server_args.py in 0.5.20"
        ),
    },
    {
        "old": "--optimistic-prefill-retries",
        "new": "--optimistic-prefill-attempts",
        "evidence": (
            "read sglang/srt/server_args.py and sglang/srt/disaggregation/prefill.py of 0.5.15.post1 (field"
            " optimistic_prefill_retries: int = 0) and of 0.5.16 (field optimistic_prefill_attempts: int = "
            "0): the same validation in server_args.py and the same use in prefill.py, renamed; no alias "
            "kept"
        ),
    },
    {
        "old": "--enable-deepep-waterfill",
        "new": "--enable-waterfill",
        "evidence": (
            "read sglang/srt/server_args.py and sglang/srt/layers/moe/topk.py of 0.5.15.post1 (field "
            "enable_deepep_waterfill) and of 0.5.16 (field enable_waterfill, the same switch in topk.py, "
            "now for the DeepEP and MegaMOE backends; 0.5.16's help no longer says it sets "
            "--moe-a2a-backend deepep); no alias kept"
        ),
    },
]

GENERATED_BY = "scripts/sglang_catalog.py"

REPO = Path(__file__).resolve().parent.parent
CATALOG_DIR = REPO / "python" / "sglbench" / "hostlib" / "sglang_catalogs"
CACHE_DIR = Path(os.environ.get("SGLBENCH_CACHE", Path.home() / ".cache" / "sglbench"))
WHEEL_CACHE = CACHE_DIR / "sglang-wheels"
VENV_DIR = CACHE_DIR / "catalog-venv"

# The wheel picked is fixed, whatever machine runs this: CPython 3.11 on x86-64 Linux.
WHEEL_TAGS = [
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
    "--platform",
    "manylinux_2_34_x86_64",
    "--only-binary=:all:",
]

# Small real packages the releases' parser-building code needs (pinned: the catalogs must not drift
# with them). Everything else the wheels import is stubbed.
VENV_REQUIREMENTS = ["msgspec==0.23.0", "pydantic==2.14.4", "packaging==26.4", "numpy==2.4.6", "dill==0.4.0"]

# Distribution name -> import name, where they differ beyond case and '-'/'_'.
DIST_TO_IMPORT: dict[str, str] = {
    "pyzmq": "zmq",
    "pillow": "PIL",
    "nvidia-ml-py": "pynvml",
    "flashinfer-python": "flashinfer",
    "flashinfer-jit-cache": "flashinfer_jit_cache",
    "sglang-kernel": "sgl_kernel",
    "sgl-kernel": "sgl_kernel",
    "python-dateutil": "dateutil",
    "cuda-python": "cuda",
    "sgl-deep-gemm": "deep_gemm",
    "sgl-deep-ep": "deep_ep",
    "sgl-flash-mla": "flash_mla",
    "flash-attn-4": "flash_attn",
    "apache-tvm-ffi": "tvm_ffi",
    "python-multipart": "multipart",
    "ipython": "IPython",
    "decord2": "decord",
    "nvidia-cutlass-dsl": "cutlass",
    "prometheus-client": "prometheus_client",
    "humming-kernels": "humming",
    "quack-kernels": "quack",
    "nvshmem4py-cu13": "nvshmem",
    "nvshmem4py-cu12": "nvshmem",
    "torch-memory-saver": "torch_memory_saver",
    "grpcio": "grpc",
    "grpcio-tools": "grpc_tools",
    "grpcio-reflection": "grpc_reflection",
    "grpcio-health-checking": "grpc_health",
    "protobuf": "google",
    "hf-transfer": "hf_transfer",
    "scikit-learn": "sklearn",
    "opencv-python": "cv2",
    "opencv-python-headless": "cv2",
    "llguidance": "llguidance",
    "smg-grpc-servicer": "smg_grpc_servicer",
    "smg-grpc-proto": "smg_grpc_proto",
}

# Imported by the wheels' code but not declared by them: dependencies of their dependencies.
KNOWN_TRANSITIVE: list[str] = [
    "triton",  # torch
    "torchvision",  # timm
    "starlette",  # fastapi
    "huggingface_hub",  # transformers
    "safetensors",  # transformers
    "tokenizers",  # transformers
    "jinja2",  # transformers
    "regex",  # transformers
    "dill",  # datasets
    "yaml",  # transformers (PyYAML)
    "google",  # protobuf via grpcio / sentencepiece
    "grpc",  # smg-grpc-servicer
    "httpx",  # openai
    "vllm",  # optional backend, imported inside try blocks
]




# --------------------------------------------------------------------------------------------------
# Pure helpers (imported by the tests).
# --------------------------------------------------------------------------------------------------


def dist_import_name(dist: str) -> str:
    """The top-level import name of a distribution named in Requires-Dist."""
    key = re.sub(r"[-_.]+", "-", dist).lower()
    return DIST_TO_IMPORT.get(key, key.replace("-", "_"))


_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def runtime_requirements(metadata: str, server_extras: Iterable[str] = ("srt",)) -> dict[str, str | None]:
    """Distributions a release needs to run its server, from its METADATA text.

    The non-extra ``Requires-Dist`` lines plus, recursively, those of the server extras (old
    releases put the runtime under ``sglang[srt]`` -> ``sglang[runtime_common]``). Returns
    {dist name: version (from ``==`` or ``>=``) or None}.
    """
    plain: list[str] = []
    by_extra: dict[str, list[str]] = {}
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req, _, marker = line.split(":", 1)[1].partition(";")
        m = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if m:
            by_extra.setdefault(re.sub(r"[-_.]+", "_", m.group(1).lower()), []).append(req.strip())
        else:
            plain.append(req.strip())
    out: dict[str, str | None] = {}
    todo = [re.sub(r"[-_.]+", "_", e.lower()) for e in server_extras]
    seen: set[str] = set()
    reqs = list(plain)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        reqs.extend(by_extra.get(extra, []))
        for r in by_extra.get(extra, []):
            m = _REQ_RE.match(r)
            if m and m.group(1).lower() == "sglang" and m.group(2):
                todo.extend(re.sub(r"[-_.]+", "_", e.strip().lower()) for e in m.group(2)[1:-1].split(","))
    for r in reqs:
        m = _REQ_RE.match(r)
        if not m or m.group(1).lower() == "sglang":
            continue
        v = re.search(r"(?:==|>=|~=)\s*([0-9][^,;\s]*)", m.group(3) or "")
        name = m.group(1)
        if out.get(name) is None:
            out[name] = v.group(1) if v else None
    return out


def _name_similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.lstrip("-"), b.lstrip("-")).ratio()


def _by_opt(flags: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o: f for f in flags for o in f["opts"]}


def detect_renames(
    catalogs: list[tuple[str, list[dict[str, Any]], dict[str, str]]],
    curated: Iterable[dict[str, str]] = (),
) -> list[dict[str, Any]]:
    """Renames between consecutive catalogued releases.

    ``catalogs``: [(release, flags, {option string: help text})] in release order (help text is
    only read here, never stored). A flag that disappears in release N is paired with a flag that
    appears in N when the evidence is strong: N declares the old spelling as a deprecated alias of
    it (``new_flag``); or both have the same dest; or identical non-empty help text; or the same
    choices and type and similar names. Flags that are still accepted in N as an alias (an extra
    option string of the new flag, or a deprecated action pointing to it) are reported with
    ``alias_kept: true``. ``curated`` renames are added when both catalogs support them.
    """
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()

    def add(entry: dict[str, Any]) -> None:
        key = (entry["old"], entry["new"])
        if key not in seen:
            seen.add(key)
            out.append(entry)

    for (prev_rel, prev_flags, prev_help), (rel, flags, help_) in itertools.pairwise(catalogs):
        prev, cur = _by_opt(prev_flags), _by_opt(flags)
        primary_prev = {f["opts"][0]: f for f in prev_flags}
        primary_cur = {f["opts"][0]: f for f in flags}
        appeared = [o for o in primary_cur if o not in prev]
        # 1. Deprecated alias in N pointing to a new flag: old spelling kept, redirected.
        for f in flags:
            target = f.get("deprecated")
            if not target:
                continue
            for new in deprecation_targets(target):
                if new not in cur or new in prev:
                    continue
                for old in f["opts"]:
                    if old in prev and old != new:
                        add(
                            _rename(
                                old,
                                new,
                                prev_rel,
                                rel,
                                f"{rel} declares {old} deprecated with new_flag {target!r}",
                                alias_kept=True,
                            )
                        )
        # 2. An old option string that became a secondary option string of a new primary flag.
        for o in appeared:
            f = primary_cur[o]
            for alias in f["opts"][1:]:
                if alias in primary_prev and alias not in primary_cur and alias != o:
                    add(
                        _rename(
                            alias,
                            o,
                            prev_rel,
                            rel,
                            f"{rel} keeps {alias} as an alias of {o}",
                            alias_kept=True,
                        )
                    )
        # 3. Disappeared flags paired with appeared ones.
        gone = [o for o in primary_prev if o not in cur]
        for old in gone:
            of = primary_prev[old]
            candidates = []
            for new in appeared:
                nf = primary_cur[new]
                if nf.get("deprecated") or new in prev:
                    continue
                reason = None
                if nf["dest"] == of["dest"]:
                    reason = f"same dest {of['dest']!r}"
                elif prev_help.get(old) and prev_help.get(old) == help_.get(new):
                    reason = "identical help text"
                elif (
                    of.get("choices")
                    and of.get("choices") == nf.get("choices")
                    and of.get("type") == nf.get("type")
                    and _name_similarity(old, new) >= 0.6
                ):
                    reason = "same choices and type, similar name"
                if reason:
                    candidates.append((new, reason))
            if len(candidates) == 1:
                new, reason = candidates[0]
                add(_rename(old, new, prev_rel, rel, f"{old} gone and {new} new in {rel}: {reason}"))
    releases = [c[0] for c in catalogs]
    for cur_entry in curated:
        old, new = cur_entry["old"], cur_entry["new"]
        first_new = next((r for r, fl, _ in catalogs if new in _by_opt(fl)), None)
        if first_new is None or releases.index(first_new) == 0:
            continue
        i = releases.index(first_new)
        prev_rel, prev_flags = catalogs[i - 1][0], catalogs[i - 1][1]
        if old not in _by_opt(prev_flags):
            continue
        kept = old in _by_opt(catalogs[i][1])
        entry = _rename(old, new, prev_rel, first_new, cur_entry["evidence"], alias_kept=kept)
        existing = next((r for r in out if (r["old"], r["new"]) == (old, new)), None)
        if existing:
            existing["evidence"] = cur_entry["evidence"] + "; " + existing["evidence"]
        else:
            add(entry)
    for r in out:
        if r.get("alias_kept"):
            i = releases.index(r["first_with_new"])
            dropped = next((rel for rel, fl, _ in catalogs[i + 1 :] if r["old"] not in _by_opt(fl)), None)
            if dropped:
                r["old_dropped_in"] = dropped
    out.sort(key=lambda r: (releases.index(r["first_with_new"]), r["old"], r["new"]))
    return out


def deprecation_targets(new_flag: str) -> list[str]:
    """Option strings a deprecated action's ``new_flag`` text names, braces expanded.

    ``"--cuda-graph-backend-{decode,prefill}=disabled"`` names ``--cuda-graph-backend-decode`` and
    ``--cuda-graph-backend-prefill``.
    """
    m = re.search(r"--[A-Za-z0-9][A-Za-z0-9_-]*(?:\{[^}]*\}[A-Za-z0-9_-]*)?", new_flag)
    if not m:
        return []
    text = m.group(0)
    b = re.search(r"\{([^}]*)\}", text)
    if not b:
        return [text]
    return [text[: b.start()] + alt.strip() + text[b.end() :] for alt in b.group(1).split(",") if alt.strip()]


def _rename(old: str, new: str, last_old: str, first_new: str, evidence: str, *, alias_kept: bool = False):
    entry: dict[str, Any] = {
        "old": old,
        "new": new,
        "last_with_old": last_old,
        "first_with_new": first_new,
        "evidence": evidence,
    }
    if alias_kept:
        entry["alias_kept"] = True
    return entry


# --------------------------------------------------------------------------------------------------
# AST fallback: read literal ``add_argument`` calls (never guesses what it cannot read).
# --------------------------------------------------------------------------------------------------


def ast_extract(source: str, action_sources: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Worker-style records from the ``add_argument`` calls in ``source`` with literal option strings.

    Names used as defaults or choices are resolved when they are module-level literals or
    ``ServerArgs.<field>`` with a literal field default; custom Action classes defined in ``source``
    or in ``action_sources`` contribute their ``__init__`` defaults (nargs, const, default). Anything
    else is given as
    ``repr`` (its source text), never guessed.
    """
    tree = ast.parse(source)
    action_trees = [tree, *(ast.parse(src) for src in action_sources)]
    field_defaults: dict[str, ast.expr] = {}
    names: dict[str, ast.expr] = {}
    action_defaults: dict[str, dict[str, ast.expr]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names[node.target.id] = node.value
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    field_defaults[st.target.id] = st.value
    for node in (n for t in action_trees for n in ast.walk(t)):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Action") for b in node.bases):
            for st in node.body:
                if isinstance(st, ast.FunctionDef) and st.name == "__init__":
                    args = st.args.args[len(st.args.args) - len(st.args.defaults) :]
                    kw = dict(zip([a.arg for a in args], st.args.defaults, strict=True))
                    kw.update(
                        {a.arg: d for a, d in zip(st.args.kwonlyargs, st.args.kw_defaults, strict=True) if d}
                    )
                    action_defaults[node.name] = kw

    def resolve(node: ast.expr | None) -> ast.expr | None:
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ServerArgs"
            and node.attr in field_defaults
        ):
            return resolve(field_defaults[node.attr])
        return node

    builtin_cls = {
        "store": "_StoreAction",
        "store_true": "_StoreTrueAction",
        "store_false": "_StoreFalseAction",
        "store_const": "_StoreConstAction",
        "append": "_AppendAction",
        "count": "_CountAction",
        "append_const": "_AppendConstAction",
        "version": "_VersionAction",
        "extend": "_ExtendAction",
    }
    records = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not opts or len(opts) != len(node.args) or not all(o.startswith("-") for o in opts):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action_node = kw.get("action")
        if action_node is None or isinstance(action_node, ast.Constant):
            cls = builtin_cls.get(_ast_literal(action_node).get("json") or "store", "_StoreAction")
            bases = [cls]
        else:
            cls = ast.unparse(action_node).split(".")[-1]
            bases = ["BooleanOptionalAction"] if cls == "BooleanOptionalAction" else []
            for key, value in action_defaults.get(cls, {}).items():
                if key in ("nargs", "const", "default"):
                    kw.setdefault(key, value)
        long_opts = [o for o in opts if o.startswith("--")]
        dest = _ast_literal(kw.get("dest")).get("json")
        dest = dest or (long_opts or opts)[0].lstrip("-").replace("-", "_")
        default_node = resolve(kw.get("default"))
        if default_node is None:
            default = {"json": {"_StoreTrueAction": False, "_StoreFalseAction": True}.get(cls)}
        else:
            default = _ast_literal(default_node)
        tname = None
        if "type" in kw:
            text = ast.unparse(kw["type"])
            short = {"int": "int", "float": "float", "str": "str", "json.loads": "json"}
            tname = short.get(text, "other:" + text.split(".")[-1])
        choices = None
        if "choices" in kw:
            c = _ast_literal(resolve(kw["choices"]))
            if "json" in c and isinstance(c["json"], list):
                choices = {"list": sorted({str(x) for x in c["json"]})}
            else:
                choices = {"repr": ast.unparse(kw["choices"])}
        if cls == "BooleanOptionalAction":
            opts = [x for o in opts for x in ([o, "--no-" + o[2:]] if o.startswith("--") else [o])]
        help_node = kw.get("help")
        records.append(
            {
                "opts": opts,
                "dest": dest,
                "cls": cls,
                "argparse_bases": bases,
                "nargs": _ast_literal(kw.get("nargs")).get("json"),
                "const": _ast_literal(resolve(kw["const"])) if "const" in kw else None,
                "default": default,
                "type": tname,
                "choices": choices,
                "required": _ast_literal(kw.get("required")).get("json") is True,
                "help": help_node.value if isinstance(help_node, ast.Constant) else None,
                "new_flag": _ast_literal(kw.get("new_flag")).get("json"),
            }
        )
    return records


def _ast_literal(node: ast.expr | None) -> dict[str, Any]:
    if node is None:
        return {"json": None}
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"repr": ast.unparse(node)}
    if isinstance(value, (set, frozenset, tuple)):
        value = sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value)
    return {"json": value} if _json_ok(value) else {"repr": repr(value)}


# --------------------------------------------------------------------------------------------------
# Worker: runs inside the scratch venv, in a fresh interpreter per release.
# --------------------------------------------------------------------------------------------------


def worker_main(root: str, out_path: str) -> int:  # pragma: no cover - exercised by generation
    import importlib
    import importlib.abc
    import importlib.machinery
    import types
    import warnings

    warnings.simplefilter("ignore")
    meta_files = list(Path(root).glob("sglang-*.dist-info/METADATA"))
    reqs = runtime_requirements(meta_files[0].read_text(encoding="utf-8"))
    versions = {dist_import_name(d): v for d, v in reqs.items()}
    stub_ok = set(versions) | set(KNOWN_TRANSITIVE)
    stubbed: set[str] = set()

    class _StubBase:
        """A real class standing for a stubbed base class (``class M(torch.nn.Module)``)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __init_subclass__(cls, **kwargs: Any) -> None:
            pass

        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.any_schema()

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _Stub(f"{type(self).__name__}().{name}")

    bases: dict[str, type] = {}

    class _Stub:
        """A permissive stand-in for any object of a stubbed module."""

        def __init__(self, name: str) -> None:
            object.__setattr__(self, "_stub_name", name)

        def __repr__(self) -> str:
            return f"<stub {self._stub_name}>"

        __str__ = __repr__

        def __format__(self, spec: str) -> str:
            return format(str(self), spec)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            path = f"{self._stub_name}.{name}"
            value = STUB_VALUES[path] if path in STUB_VALUES else _Stub(path)
            object.__setattr__(self, name, value)
            return value

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Stub):
                return args[0]  # used as a decorator
            return _Stub(f"{self._stub_name}()")

        def __mro_entries__(self, bases_: tuple) -> tuple:
            name = self._stub_name.rsplit(".", 1)[-1]
            if self._stub_name not in bases:
                bases[self._stub_name] = type(name, (_StubBase,), {"__module__": "stub"})
            return (bases[self._stub_name],)

        def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.any_schema()

        def __getitem__(self, item: Any) -> Any:
            return _Stub(f"{self._stub_name}[]")

        def __setitem__(self, key: Any, value: Any) -> None:
            pass

        def __delitem__(self, key: Any) -> None:
            pass

        def __iter__(self):
            return iter(())

        def __len__(self) -> int:
            return 0

        def __contains__(self, item: Any) -> bool:
            return False

        def __bool__(self) -> bool:
            return False

        def __int__(self) -> int:
            return 0

        __index__ = __int__

        def __float__(self) -> float:
            return 0.0

        def __eq__(self, other: Any) -> bool:
            return other is self

        def __hash__(self) -> int:
            return id(self)

        def __lt__(self, other: Any) -> bool:
            return False

        __le__ = __gt__ = __ge__ = __lt__

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: Any) -> bool:
            return False

        def __instancecheck__(self, obj: Any) -> bool:
            return False

        def __subclasscheck__(self, cls: Any) -> bool:
            return False

        def _same(self, *args: Any) -> Any:
            return self

        __or__ = __ror__ = __and__ = __rand__ = __xor__ = __rxor__ = _same
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
        __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _same
        __pow__ = __rpow__ = __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _same
        __neg__ = __pos__ = __abs__ = __invert__ = __matmul__ = __rmatmul__ = _same

    class _StubModule(types.ModuleType):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.__path__: list[str] = []

        def __getattr__(self, name: str) -> Any:
            if name == "__version__":
                return versions.get(self.__name__.split(".")[0]) or "1.0.0"
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            if self.__name__ == "torch" and name == "npu":
                raise AttributeError(name)  # an Ascend build would be detected by its presence
            path = f"{self.__name__}.{name}"
            value = STUB_VALUES[path] if path in STUB_VALUES else _Stub(path)
            setattr(self, name, value)
            return value

    # A CPU-only torch build: no ROCm/HIP or CUDA version (else `torch.version.hip is not None` would
    # make old releases take their AMD code paths).
    STUB_VALUES: dict[str, Any] = {"torch.version.hip": None, "torch.version.cuda": None}

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            top = name.split(".")[0]
            if top == "sglang" or top not in stub_ok:
                return None
            if top in sys.modules and not isinstance(sys.modules[top], _StubModule):
                return None  # a submodule of a real package: its own import error handling applies
            for finder in sys.meta_path:
                if finder is self:
                    continue
                try:
                    spec = finder.find_spec(name, path, target)
                except Exception:
                    spec = None
                if spec is not None:
                    return None
            stubbed.add(top)
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec: Any) -> Any:
            return _StubModule(spec.name)

        def exec_module(self, module: Any) -> None:
            pass

    import builtins

    real_getattr, real_hasattr, real_setattr = builtins.getattr, builtins.hasattr, builtins.setattr

    def _name(n: Any) -> Any:
        return str(n) if isinstance(n, _Stub) else n

    def getattr_(obj: Any, name: Any, *default: Any) -> Any:
        return real_getattr(obj, _name(name), *default)

    builtins.getattr = getattr_
    builtins.hasattr = lambda obj, name: real_hasattr(obj, _name(name))
    builtins.setattr = lambda obj, name, value: real_setattr(obj, _name(name), value)

    sys.meta_path.append(_Finder())
    sys.path.insert(0, root)
    pkg = types.ModuleType("sglang")
    pkg.__path__ = [os.path.join(root, "sglang")]
    pkg.__version__ = meta_files[0].parent.name.split("-")[1]
    sys.modules["sglang"] = pkg

    mod = importlib.import_module("sglang.srt.server_args")

    parser, how = capture_parser(mod)
    records = [_describe_action(a, _Stub) for a in parser._actions if a.option_strings]
    result = {"how": how, "allow_abbrev": parser.allow_abbrev, "stubbed": sorted(stubbed), "actions": records}
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")
    return 0




# --------------------------------------------------------------------------------------------------
# Driver.
# --------------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_venv() -> Path:
    """The scratch venv's python (created on first use, outside the repo)."""
    py = VENV_DIR / "bin" / "python"
    stamp = VENV_DIR / "sglbench-requirements.txt"
    want = "\n".join(VENV_REQUIREMENTS) + "\n"
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    base = sys.executable
    if sys.version_info[:2] != (3, 11):
        base = shutil.which("python3.11") or sys.executable
        if base == sys.executable:
            log("warning: no python3.11 found; the releases' parsers run under " + sys.version.split()[0])
    log(f"creating scratch venv {VENV_DIR}")
    subprocess.run([base, "-m", "venv", "--clear", str(VENV_DIR)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *VENV_REQUIREMENTS], check=True)
    stamp.write_text(want)
    return py


def fetch_wheel(release: str, py: Path) -> Path:
    """The release's wheel in the cache (downloaded with pip if missing)."""
    dl = WHEEL_CACHE / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    found = sorted(dl.glob(f"sglang-{release}-*.whl"))
    if not found:
        log(f"{release}: pip download --no-deps sglang=={release}")
        subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                *WHEEL_TAGS,
                f"sglang=={release}",
                "-d",
                str(dl),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found = sorted(dl.glob(f"sglang-{release}-*.whl"))
    if len(found) != 1:
        raise SystemExit(f"{release}: expected one wheel in {dl}, found {[p.name for p in found]}")
    return found[0]


def unpack(wheel: Path, release: str) -> Path:
    root = WHEEL_CACHE / "x" / release
    done = root / ".unpacked"
    if done.exists() and done.read_text() == wheel.name:
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root)
    done.write_text(wheel.name)
    return root


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SGL_", "CUDA_", "PYTHON"))}
    env["SGLANG_USE_CPU_ENGINE"] = "1"  # platform resolution without a GPU
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = env["HF_HUB_OFFLINE"] = "1"
    return env


def extract(release: str, py: Path, *, use_cache: bool = True) -> dict[str, Any]:
    """Raw worker result for one release: {"method", "wheel", "wheel_sha256", "allow_abbrev", "actions"}."""
    wheel = fetch_wheel(release, py)
    digest = sha256(wheel)
    script_digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    raw_cache = WHEEL_CACHE / "raw" / f"{release}-{digest[:16]}-{script_digest}.json"
    if use_cache and raw_cache.exists():
        return json.loads(raw_cache.read_text())
    root = unpack(wheel, release)
    result: dict[str, Any]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        t0 = time.monotonic()
        proc = subprocess.run(
            [str(py), str(Path(__file__).resolve()), "--_worker", str(root), str(out)],
            env=_clean_env(),
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode == 0 and out.exists():
            result = json.loads(out.read_text())
            result["method"] = "parser"
            log(
                f"{release}: parser built in {time.monotonic() - t0:.1f}s, {len(result['actions'])} actions, "
                f"stubbed {', '.join(result['stubbed'])}"
            )
        else:
            tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
            log(f"{release}: running the parser failed; reading add_argument calls with ast\n{tail}")
            src, action_srcs = _ast_sources(root)
            if "add_cli_args_from_dataclass" in src:
                # Most flags come from dataclass field annotations, not add_argument calls: reading the
                # calls would give an incomplete catalog. Stop rather than write one.
                raise SystemExit(f"{release}: cannot build the parser and the ast fallback cannot read it")
            result = {
                "method": "ast",
                "allow_abbrev": "allow_abbrev=False" not in src,
                "actions": ast_extract(src, action_srcs),
                "failure": tail.splitlines()[-1] if tail else f"exit {proc.returncode}",
            }
    result["wheel"] = wheel.name
    result["wheel_sha256"] = digest
    raw_cache.parent.mkdir(parents=True, exist_ok=True)
    raw_cache.write_text(json.dumps(result))
    return result


def build_catalog(release: str, raw: dict[str, Any]) -> tuple[str, list[dict[str, Any]], dict[str, str]]:
    flags = catalog_flags(raw["actions"])
    seen: set[str] = set()
    for f in flags:
        for o in f["opts"]:
            if o in seen:
                raise SystemExit(f"{release}: option {o} declared twice")
            seen.add(o)
    meta = {
        "schema": SCHEMA,
        "release": release,
        "wheel": raw["wheel"],
        "wheel_sha256": raw["wheel_sha256"],
        "method": raw["method"],
        "allow_abbrev": raw["allow_abbrev"],
        "generated_by": GENERATED_BY,
    }
    help_ = {r["opts"][0]: r["help"] for r in raw["actions"] if r["opts"] and r.get("help")}
    for r in raw["actions"]:
        for o in r["opts"]:
            if r.get("help"):
                help_.setdefault(o, r["help"])
    return render_catalog(meta, flags), flags, help_


def _ast_sources(root: Path) -> tuple[str, list[str]]:
    """server_args.py of an unpacked release, and the module defining its custom actions if separate."""
    srt = root / "sglang" / "srt"
    extra = [
        p.read_text(encoding="utf-8") for p in [srt / "arg_groups" / "argparse_actions.py"] if p.exists()
    ]
    return (srt / "server_args.py").read_text(encoding="utf-8"), extra


def ast_cross_check(release: str, raw: dict[str, Any]) -> None:
    """Compare the built parser's option strings with the literal add_argument calls (logged only).

    Releases whose flags are all declared by add_argument calls must agree both ways; releases that
    also declare flags through dataclass fields only in one direction.
    """
    root = WHEEL_CACHE / "x" / release
    if raw["method"] != "parser" or not (root / "sglang" / "srt" / "server_args.py").exists():
        return
    src, action_srcs = _ast_sources(root)
    literal = {o for r in ast_extract(src, action_srcs) for o in r["opts"]}
    built = {o for r in raw["actions"] for o in r["opts"]} - {"-h", "--help"}
    missing = sorted(literal - built)
    extra = [] if "add_cli_args_from_dataclass" in src else sorted(built - literal)
    if missing or extra:
        log(f"{release}: note: add_argument calls vs built parser: missing {missing}, extra {extra}")


def generate(releases: list[str], out_dir: Path, *, use_cache: bool = True) -> dict[str, Any]:
    py = ensure_venv()
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {}
    for release in releases:
        raw = extract(release, py, use_cache=use_cache)
        text, flags, _ = build_catalog(release, raw)
        (out_dir / f"{release}.json").write_text(text, encoding="utf-8")
        ast_cross_check(release, raw)
        summary[release] = (len(flags), raw["method"])
    return summary


def regenerate_renames(out_dir: Path, *, use_cache: bool = True) -> list[dict[str, Any]]:
    py = ensure_venv()
    catalogs = []
    for release in RELEASES:
        raw = extract(release, py, use_cache=use_cache)
        _, flags, help_ = build_catalog(release, raw)
        catalogs.append((release, flags, help_))
    renames = detect_renames(catalogs, CURATED_RENAMES)
    (out_dir / "renames.json").write_text(render_renames(renames), encoding="utf-8")
    return renames


def check(use_cache: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        generate(RELEASES, tmpdir, use_cache=use_cache)
        regenerate_renames(tmpdir, use_cache=use_cache)
        drift = 0
        names = sorted({p.name for p in tmpdir.glob("*.json")} | {p.name for p in CATALOG_DIR.glob("*.json")})
        hand_written = [n for n in names if not (tmpdir / n).exists() and is_overlay(CATALOG_DIR / n)]
        names = [n for n in names if n not in hand_written]
        for name in names:
            new, old = tmpdir / name, CATALOG_DIR / name
            a = old.read_text(encoding="utf-8").splitlines() if old.exists() else []
            b = new.read_text(encoding="utf-8").splitlines() if new.exists() else []
            if a != b:
                drift += 1
                sys.stdout.writelines(
                    line + "\n"
                    for line in difflib.unified_diff(
                        a, b, f"committed/{name}", f"generated/{name}", lineterm="", n=0
                    )
                )
        print(
            f"{len(names)} files compared, {drift} drifted"
            + (
                f"; hand-written overlays not generated here: {', '.join(hand_written)}"
                if hand_written
                else ""
            )
        )
        return 1 if drift else 0


def is_overlay(path: Path) -> bool:
    """A hand-written catalog that extends a release (``"method": "overlay"``), not generated here."""
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("method") == "overlay"
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        return worker_main(argv[1], argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*", help="releases to (re)generate; each must be listed in RELEASES")
    ap.add_argument("--all", action="store_true", help="regenerate every release in RELEASES")
    ap.add_argument(
        "--check", action="store_true", help="regenerate into a temp dir and diff (exit 1 on drift)"
    )
    ap.add_argument(
        "--no-cache", action="store_true", help="re-run the extraction even if a cached result exists"
    )
    ap.add_argument("--out", type=Path, default=CATALOG_DIR, help="output directory (default: %(default)s)")
    args = ap.parse_args(argv)
    use_cache = not args.no_cache
    if args.check:
        return check(use_cache)
    unknown = [r for r in args.releases if r not in RELEASES]
    if unknown:
        ap.error(f"not in RELEASES (add them to the list at the top of this script first): {unknown}")
    releases = RELEASES if args.all else args.releases
    if not releases:
        ap.error("name releases, or --all, or --check")
    t0 = time.monotonic()
    summary = generate(releases, args.out, use_cache=use_cache)
    renames = regenerate_renames(args.out, use_cache=use_cache)
    for release, (n, method) in summary.items():
        print(f"{release}: {n} flags ({method})")
    for r in renames:
        print(
            f"rename {r['old']} -> {r['new']} ({r['last_with_old']} -> {r['first_with_new']})"
            + (" alias kept" if r.get("alias_kept") else "")
        )
    print(f"done in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
