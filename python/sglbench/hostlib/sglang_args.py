"""SGLang ``launch_server`` command lines, checked the way a given SGLang release checks them.

Stdlib only: shipped to the GPU host as ``ansible.module_utils.sglbench_hostlib.sglang_args`` and used by
the controller (``sglbench plan``, the matrix checks), the host modules and the SGLang stand-in.

The flags themselves are not declared here: they come from the release's catalog
(:mod:`sglang_catalog`, generated from SGLang's own parser for each release, or dumped from the
SGLang installed on the host). What this module adds:

- **Validation that never rejects what the release accepts.** With a release (``release=`` or an
  explicit :class:`~sglang_catalog.Catalog`), the command line is parsed by that release's parser;
  a flag it does not have is an error naming the release, the nearest real flag and any rename.
  Without a release, a command line is accepted when *some* catalogued release accepts it, and the
  result says which ones do.
- **One view for the planner.** The parsed namespace carries the release's own field names *and*
  the names the capacity planner reads (``mamba_scheduler_strategy``, ``cuda_graph_max_bs``, …)
  whichever spelling the release uses (:data:`PLANNER_FIELDS`), plus which flags were given and
  whether each changes memory (:func:`capacity_effect`).
- The cross-flag rules SGLang enforces when it builds ``ServerArgs`` (messages name the flags).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import sglang_catalog, sglang_facts

# The speculative algorithms and the draft-token rule have one home: sglang_facts.
SPEC_ALGORITHMS = sglang_facts.SPEC_ALGORITHMS
DRAFT_MODEL_ALGORITHMS = sglang_facts.DRAFT_MODEL_ALGORITHMS
draft_token_count = sglang_facts.draft_token_count
# ... of which these cannot run without one. EAGLE without a draft path uses the target's own MTP
# layers (DeepSeek-V3, GLM-4.5+, Qwen3.5/3.6, MiMo: SGLang takes the model path as the draft).
DRAFT_REQUIRED_ALGORITHMS: frozenset[str] = DRAFT_MODEL_ALGORITHMS - {"EAGLE"}

# The planner's field names and, for each, the ServerArgs fields releases have used for it (first
# one wins) and the value when none is set. Every flag whose dest is listed here changes the
# capacity prediction.
PLANNER_FIELDS: dict[str, tuple[tuple[str, ...], Any]] = {
    "model_path": (("model_path",), None),
    "revision": (("revision",), None),
    "dtype": (("dtype",), "auto"),
    "quantization": (("quantization",), None),
    "context_length": (("context_length",), None),
    "tp_size": (("tp_size", "tensor_parallel_size"), 1),
    "pp_size": (("pp_size", "pipeline_parallel_size"), 1),
    "dp_size": (("dp_size", "data_parallel_size"), 1),
    "enable_dp_attention": (("enable_dp_attention",), False),
    "mem_fraction_static": (("mem_fraction_static",), None),
    "max_running_requests": (("max_running_requests",), None),
    "max_total_tokens": (("max_total_tokens",), None),
    "chunked_prefill_size": (("chunked_prefill_size",), None),
    "max_prefill_tokens": (("max_prefill_tokens",), 16384),
    "page_size": (("page_size",), None),
    "kv_cache_dtype": (("kv_cache_dtype",), "auto"),
    "swa_full_tokens_ratio": (("swa_full_tokens_ratio",), None),
    "disable_radix_cache": (("disable_radix_cache",), False),
    "disable_overlap_schedule": (("disable_overlap_schedule",), False),
    "disable_cuda_graph": (("disable_cuda_graph",), False),
    "cuda_graph_max_bs": (("cuda_graph_max_bs", "cuda_graph_max_bs_decode"), None),
    "max_mamba_cache_size": (("max_mamba_cache_size",), None),
    "mamba_ssm_dtype": (("mamba_ssm_dtype",), None),
    "mamba_full_memory_ratio": (("mamba_full_memory_ratio",), None),
    "mamba_scheduler_strategy": (("mamba_scheduler_strategy", "mamba_radix_cache_strategy"), "auto"),
    "mamba_track_interval": (("mamba_track_interval",), 256),
    "speculative_algorithm": (("speculative_algorithm",), None),
    "speculative_draft_model_path": (("speculative_draft_model_path",), None),
    "speculative_draft_model_revision": (("speculative_draft_model_revision",), None),
    "speculative_num_steps": (("speculative_num_steps",), None),
    "speculative_eagle_topk": (("speculative_eagle_topk",), None),
    "speculative_num_draft_tokens": (("speculative_num_draft_tokens",), None),
    "speculative_dflash_block_size": (("speculative_dflash_block_size",), None),
    "speculative_ddtree_budget": (("speculative_ddtree_budget",), None),
    "speculative_draft_window_size": (
        ("speculative_draft_window_size", "speculative_dflash_draft_window_size"),
        None,
    ),
}
_HICACHE = "hierarchical cache lives in host memory: the GPU KV pool is planned unchanged"
_LORA = "LoRA adapter pools are not modelled: planned as if no adapter memory is reserved"
_EP = "expert parallelism changes MoE weight sharding; weights are read from the checkpoint"
# Fields that change GPU memory in ways the planner does not model: planned anyway, with the
# stated assumption (the prediction is then an upper bound on what the server will get).
ASSUMED_FIELDS: dict[str, str] = {
    "enable_lora": _LORA,
    "lora_paths": _LORA,
    "max_loras_per_batch": _LORA,
    "max_lora_rank": _LORA,
    "enable_hierarchical_cache": _HICACHE,
    "hicache_ratio": _HICACHE,
    "hicache_size": _HICACHE,
    "disaggregation_mode": "prefill/decode disaggregation: each server is planned as a standalone one",
    "nnodes": "multi-node: planned per node, with --tp-size split evenly over the nodes",
    "enable_torch_compile": "torch.compile workspaces are not modelled (they use the activation reserve)",
    "attn_dp_size": "attention data parallelism is planned like --enable-dp-attention",
    "enable_two_batch_overlap": "two-batch overlap buffers are not modelled",
    "ep_size": _EP,
    "expert_parallel_size": _EP,
    "moe_a2a_backend": "expert-parallel all-to-all buffers are not modelled",
    "cuda_graph_bs": "the CUDA graph batch sizes are planned from their maximum",
    "speculative_draft_kv_cache_dtype": "the draft KV cache is planned in the target's KV dtype",
    "speculative_draft_model_quantization": "draft weights are read from the checkpoint as stored",
}
# Flags that neither appear in the planner's fields nor change GPU memory, but read like they do.
_ALSO_CAPACITY_NEUTRAL = frozenset({"enable_metrics", "log_level", "host", "port", "api_key"})


class SglangArgsError(ValueError):
    """A launch_server command line that SGLang would reject (message names the flag)."""


@dataclass(frozen=True)
class GivenFlag:
    """One flag of the command line: as written, its canonical spelling and ServerArgs field."""

    written: str
    flag: str
    dest: str


# --- which release -------------------------------------------------------------------------------


def catalog_for(release: str, directory: str | None = None) -> tuple[sglang_catalog.Catalog, bool]:
    """The catalog for an SGLang version and whether it is that exact release."""
    available = sglang_catalog.releases(directory)
    try:
        chosen, exact = sglang_catalog.select_release(release, available)
    except sglang_catalog.CatalogError as exc:
        raise SglangArgsError(str(exc)) from None
    return sglang_catalog.load(chosen, directory), exact


def _renames(directory: str | None) -> list[sglang_catalog.Rename]:
    try:
        return sglang_catalog.load_renames(directory)
    except sglang_catalog.CatalogError:
        return []


# --- unknown flags -------------------------------------------------------------------------------


def _releases_with(option: str, catalogs: Sequence[sglang_catalog.Catalog]) -> list[str]:
    return [c.release for c in catalogs if option in c.by_option]


def _span(releases: list[str]) -> str:
    if not releases:
        return ""
    return releases[0] if len(releases) == 1 else f"{releases[0]} to {releases[-1]}"


def unknown_flag_message(
    option: str,
    catalog: sglang_catalog.Catalog,
    *,
    renames: Sequence[sglang_catalog.Rename] = (),
    others: Sequence[sglang_catalog.Catalog] = (),
) -> str:
    """Why ``option`` fails in ``catalog``'s release: rename, nearest real flag, releases that had it."""
    matches = catalog.match(option)
    if len(matches) > 1:
        parts = [
            f"ambiguous option: {option} could match {', '.join(matches)} in SGLang {catalog.release}"
            " (spell the flag out)"
        ]
    else:
        parts = [f"{option} is not a flag of SGLang {catalog.release}"]
    for rn in renames:
        if rn.old == option and rn.new in catalog.by_option:
            since = f" in {rn.first_with_new}" if rn.first_with_new else ""
            parts.append(f"it was renamed {rn.new}{since}")
            break
        if rn.new == option and rn.old in catalog.by_option:
            parts.append(f"this release spells it {rn.old} (renamed {option} in {rn.first_with_new})")
            break
    else:
        near = difflib.get_close_matches(option, list(catalog.by_option), n=1, cutoff=0.75)
        if near and len(matches) <= 1:
            parts.append(f"nearest flag: {near[0]}")
    had = _releases_with(option, others)
    if had:
        parts.append(f"known in SGLang {_span(had)}")
    return "; ".join(parts)


def _unknown_options(argv: Sequence[str], catalog: sglang_catalog.Catalog) -> list[str]:
    out = []
    for _, option in sglang_catalog.option_tokens(argv):
        if len(catalog.match(option)) != 1 and option not in out:
            out.append(option)
    return out


def given_flags(argv: Sequence[str], catalog: sglang_catalog.Catalog) -> list[GivenFlag]:
    """The flags of ``argv`` as ``catalog``'s release reads them (abbreviations resolved)."""
    out = []
    for _, option in sglang_catalog.option_tokens(argv):
        matches = catalog.match(option)
        if len(matches) == 1:
            spec = catalog.by_option[matches[0]]
            out.append(GivenFlag(option, spec.flag, spec.dest))
    return out


# --- parsing -------------------------------------------------------------------------------------


def _planner_view(ns: argparse.Namespace, given: Sequence[GivenFlag] = ()) -> argparse.Namespace:
    """Add the planner's field names: a field given on the command line wins, else the first of the
    release's fields that has a value, else the planner's default."""
    given_dests = [g.dest for g in given]
    for name, (fields, default) in PLANNER_FIELDS.items():
        present = [f for f in fields if f in given_dests]
        value = getattr(ns, present[-1], None) if present else None
        for field_name in fields:
            if value is not None:
                break
            value = getattr(ns, field_name, None)
        setattr(ns, name, default if value is None else value)
    algo = ns.speculative_algorithm
    if isinstance(algo, str):
        ns.speculative_algorithm = None if algo.upper() == "NONE" else algo.upper()
    return ns


def _parse_with(
    argv: Sequence[str],
    catalog: sglang_catalog.Catalog,
    renames: Sequence[sglang_catalog.Rename],
    others: Sequence[sglang_catalog.Catalog],
) -> argparse.Namespace:
    unknown = _unknown_options(argv, catalog)
    if unknown:
        raise SglangArgsError(
            " | ".join(unknown_flag_message(o, catalog, renames=renames, others=others) for o in unknown)
        )
    try:
        ns = sglang_catalog.cached_parser(catalog).parse_args(list(argv))
    except ValueError as exc:
        raise SglangArgsError(f"SGLang {catalog.release}: {exc}") from None
    given = given_flags(argv, catalog)
    ns = _planner_view(ns, given)
    ns._sglbench_release = catalog.release
    ns._sglbench_given = given
    ns._sglbench_spelling = spellings(catalog)
    _check(ns)
    return ns


def spellings(catalog: sglang_catalog.Catalog) -> dict[str, str]:
    """ServerArgs field -> the flag the release documents for it (deprecated aliases last)."""
    out: dict[str, str] = {}
    for spec in sorted(catalog.flags, key=lambda s: s.deprecated is not None):
        out.setdefault(spec.dest, spec.flag)
    return out


def parse_launch_args_or_raise(
    argv: Sequence[str],
    release: str | None = None,
    *,
    catalog: sglang_catalog.Catalog | None = None,
    catalog_dir: str | None = None,
) -> argparse.Namespace:
    """Parse like SGLang, raising :class:`SglangArgsError` (message names the flag).

    ``catalog`` (e.g. dumped from the installed SGLang) or ``release`` pick the parser; with
    neither, the newest catalogued release that accepts the command line is used and
    ``ns._sglbench_accepted_by`` lists every catalogued release that accepts it.
    """
    renames = _renames(catalog_dir)
    if catalog is None and release is not None:
        catalog, _exact = catalog_for(release, catalog_dir)
    if catalog is not None:
        others = sglang_catalog.load_all(catalog_dir)
        ns = _parse_with(argv, catalog, renames, others)
        ns._sglbench_accepted_by = [catalog.release]
        # the release asked for, when it is older than (or between) the catalogued ones
        ns._sglbench_requested_release = release or catalog.release
        return ns
    catalogs = sglang_catalog.load_all(catalog_dir)
    if not catalogs:
        raise SglangArgsError(
            f"no SGLang flag catalogs found in {catalog_dir or sglang_catalog.default_dir()}"
        )
    accepted: list[tuple[sglang_catalog.Catalog, argparse.Namespace]] = []
    first_error: SglangArgsError | None = None
    for cat in reversed(catalogs):
        try:
            accepted.append((cat, _parse_with(argv, cat, renames, catalogs)))
        except SglangArgsError as exc:
            first_error = first_error or exc
    if not accepted:
        assert first_error is not None
        raise SglangArgsError(f"no catalogued SGLang release accepts this command line: {first_error}")
    ns = accepted[0][1]
    ns._sglbench_accepted_by = sglang_catalog.sort_versions(c.release for c, _ in accepted)
    return ns


def parse_launch_args(
    argv: Sequence[str],
    prog: str = "sglang serve",
    release: str | None = None,
    *,
    catalog_dir: str | None = None,
) -> argparse.Namespace:
    """Parse as ``release``'s own ``launch_server`` does: on error print usage and the message to
    stderr and exit with status 2 (what the SGLang stand-in does)."""
    if release is None:
        available = sglang_catalog.releases(catalog_dir)
        release = [r for r in available if "+" not in r][-1]
    catalog, _ = catalog_for(release, catalog_dir)
    parser = sglang_catalog.build_parser(catalog, prog)
    ns = parser.parse_args(list(argv))
    given = given_flags(argv, catalog)
    ns = _planner_view(ns, given)
    ns._sglbench_release = catalog.release
    ns._sglbench_given = given
    ns._sglbench_spelling = spellings(catalog)
    try:
        _check(ns)
    except SglangArgsError as exc:
        parser.error(str(exc))
    return ns


def _check(ns: argparse.Namespace) -> None:
    """Cross-flag rules SGLang enforces at ServerArgs time (messages name the flags)."""
    for flag, value in (("--tp-size", ns.tp_size), ("--dp-size", ns.dp_size), ("--pp-size", ns.pp_size)):
        if value < 1:
            raise SglangArgsError(f"{flag} must be >= 1, got {value}")
    port = getattr(ns, "port", 30000)
    if port is not None and not 0 < port < 65536:
        raise SglangArgsError(f"--port must be in 1..65535, got {port}")
    mfs = ns.mem_fraction_static
    if mfs is not None and not 0.0 < mfs < 1.0:
        raise SglangArgsError(f"--mem-fraction-static must be in (0, 1), got {mfs}")
    if ns.max_running_requests is not None and ns.max_running_requests < 1:
        raise SglangArgsError(f"--max-running-requests must be >= 1, got {ns.max_running_requests}")
    if ns.context_length is not None and ns.context_length < 1:
        raise SglangArgsError(f"--context-length must be >= 1, got {ns.context_length}")
    algo = ns.speculative_algorithm
    if algo in DRAFT_REQUIRED_ALGORITHMS and not ns.speculative_draft_model_path:
        raise SglangArgsError(
            f"--speculative-algorithm {algo} needs --speculative-draft-model-path (the draft checkpoint)"
        )
    if algo is None and ns.speculative_draft_model_path:
        raise SglangArgsError("--speculative-draft-model-path is set but --speculative-algorithm is not")
    block, draft = ns.speculative_dflash_block_size, ns.speculative_num_draft_tokens
    spec = sglang_facts.SPEC_BY_NAME.get(algo) if algo else None
    dflash_family = spec is not None and spec.family == sglang_facts.FAMILY_DFLASH
    if dflash_family and block is not None and draft is not None and block != draft:
        raise SglangArgsError(
            f"--speculative-dflash-block-size ({block}) and --speculative-num-draft-tokens ({draft}) "
            "must match"
        )


# --- what the planner makes of the flags ---------------------------------------------------------


def _planner_dests() -> frozenset[str]:
    return frozenset(f for fields, _ in PLANNER_FIELDS.values() for f in fields)


def capacity_effect(ns: argparse.Namespace) -> dict[str, list[str]]:
    """The given flags by their effect on the plan: ``modelled`` (the planner reads them),
    ``assumed`` (memory effect not modelled: ``"--flag: assumption"``), ``none`` (does not affect
    capacity: passed to the unit untouched)."""
    modelled: list[str] = []
    assumed: list[str] = []
    neutral: list[str] = []
    planner = _planner_dests()
    for given in getattr(ns, "_sglbench_given", []):
        if given.dest in planner:
            bucket, text = modelled, given.flag
        elif given.dest in ASSUMED_FIELDS:
            bucket, text = assumed, f"{given.flag}: {ASSUMED_FIELDS[given.dest]}"
        else:
            bucket, text = neutral, given.flag
        if text not in bucket:
            bucket.append(text)
    return {"modelled": modelled, "assumed": assumed, "none": neutral}


def spell(ns: argparse.Namespace | None, name: str) -> str:
    """The flag for a planner field in the release ``ns`` was parsed for (``--mamba-radix-cache-
    strategy`` on releases that renamed ``--mamba-scheduler-strategy``)."""
    spelling = getattr(ns, "_sglbench_spelling", None) or {}
    for field_name in PLANNER_FIELDS.get(name, ((name,), None))[0]:
        if field_name in spelling:
            return spelling[field_name]
    return "--" + name.replace("_", "-")


def to_argv(flags: dict[str, Any]) -> list[str]:
    """Render ``{"--flag": value}`` (or ``{"flag_name": value}``) as an argv list.

    ``True`` renders a bare switch, ``False``/``None`` omit the flag, lists render as several
    values. Keys may be given as ``mem_fraction_static`` or ``--mem-fraction-static``.
    """
    argv: list[str] = []
    for key, value in flags.items():
        flag = key if key.startswith("--") else "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(flag)
            argv.extend(str(v) for v in value)
        else:
            argv.extend([flag, str(value)])
    return argv
