"""Facts about SGLang the project relies on, each declared once: speculative algorithms, HTTP paths,
result schema ids.

Standard library only: shipped to the GPU host as ``ansible.module_utils.sglbench_hostlib.sglang_facts``
and imported by the launch-flag parser, the capacity planner, the Ansible filters, the load
generator and the SGLang stand-in. Copies that cannot import this module (role argument specs,
docs, Jinja templates, the stand-in's README) are compared with it by
``tests/python/hostlib/test_sglang_facts.py``, so a copy that drifts fails the fast suite.

Where the facts are explained: ``docs/sglang-releases.md`` (speculative flags per release),
``docs/capacity.md`` (the startup reservation of each algorithm), ``docs/contract.md`` (the HTTP API
as the real SGLang and the stand-in answer it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# ------------------------------------------------------------------------------------------------
# Speculative decoding
# ------------------------------------------------------------------------------------------------

# Token-rule families: how an algorithm's verify width is configured.
FAMILY_EAGLE = "eagle"  # draft steps x topk tree: --speculative-num-steps/-eagle-topk/-num-draft-tokens
FAMILY_DFLASH = "dflash"  # block drafter: one draft pass proposes a block (DDTree: a tree over it)
FAMILY_NGRAM = "ngram"  # no draft model: suffix-trie lookups

# Draft checkpoint (--speculative-draft-model-path) per algorithm, as this project requires it.
DRAFT_REQUIRED = "required"
DRAFT_OPTIONAL = "optional"  # NEXTN: the target's own MTP layers draft unless a path is given
DRAFT_NONE = "none"

# How the planner folds the draft's KV cache into the per-token cell of the shared pool.
KV_FOLD_NONE = "none"  # no draft KV (NGRAM)
# DFLASH/DDTREE: variant A not folded (allocated from the slack, as observed); B ceil(cell x (T +
# draft layers) / T); C target cell + exact draft cell.
KV_FOLD_DRAFT_CELL = "draft_cell"
# EAGLE family: variant C only, cell x (1 + draft layers / target layers).
KV_FOLD_LAYER_RATIO = "layer_ratio"

FLAG_NUM_DRAFT_TOKENS = "--speculative-num-draft-tokens"
FLAG_NUM_STEPS = "--speculative-num-steps"
FLAG_EAGLE_TOPK = "--speculative-eagle-topk"
FLAG_DFLASH_BLOCK_SIZE = "--speculative-dflash-block-size"
FLAG_DDTREE_BUDGET = "--speculative-ddtree-budget"

# EAGLE-family auto parameters (steps, topk, draft tokens) when none of the three flags is set
# [V1 server_args.auto_choose_speculative_params]: (5, 4, 8) for Llama/Grok, (3, 1, 4) otherwise.
EAGLE_AUTO_PARAMS: tuple[int, int, int] = (3, 1, 4)
EAGLE_AUTO_PARAMS_LLAMA: tuple[int, int, int] = (5, 4, 8)
LLAMA_LIKE_ARCHITECTURES: tuple[str, ...] = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1ModelForCausalLM")
DFLASH_DEFAULT_BLOCK_SIZE = 16  # no flag and no block_size in the draft config
NGRAM_DEFAULT_DRAFT_TOKENS = 12
# The stand-in's accept length for an algorithm it has no figure for.
SIM_FALLBACK_ACCEPT_LENGTH = 2.0

_GIB_MIB = 1024


class SpecFlagError(ValueError):
    """Speculative flags SGLang would reject; ``flag`` names the flag to fix."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")
        self.flag = flag
        self.message = message


DraftTokenRule = Callable[[Any, Mapping[str, Any] | None, str | None], int]


def _flag(ns: Any, name: str) -> Any:
    """A parsed flag; ``None`` when unset or when the release's namespace has no such field."""
    return getattr(ns, name, None)


def _dflash_block(ns: Any, draft_cfg: Mapping[str, Any] | None) -> int:
    """DFLASH verify width: ``--speculative-dflash-block-size`` (alias ``--speculative-num-draft-tokens``;
    both set must match), else the draft config's ``block_size`` (top level or ``dflash_config``), else 16.
    [V3 speculative_hook._handle_dflash]"""
    block_flag = _flag(ns, "speculative_dflash_block_size")
    draft_flag = _flag(ns, "speculative_num_draft_tokens")
    if block_flag is not None and draft_flag is not None and block_flag != draft_flag:
        raise SpecFlagError(
            FLAG_DFLASH_BLOCK_SIZE, f"({block_flag}) and {FLAG_NUM_DRAFT_TOKENS} ({draft_flag}) must match"
        )
    block = block_flag or draft_flag
    if block is None and draft_cfg:
        block = draft_cfg.get("block_size") or (draft_cfg.get("dflash_config") or {}).get("block_size")
    block = int(block or DFLASH_DEFAULT_BLOCK_SIZE)
    if block < 1:
        raise SpecFlagError(FLAG_DFLASH_BLOCK_SIZE, f"must be >= 1, got {block}")
    return block


def _dflash_tokens(ns: Any, draft_cfg: Mapping[str, Any] | None, arch: str | None) -> int:
    return _dflash_block(ns, draft_cfg)


def _ddtree_tokens(ns: Any, draft_cfg: Mapping[str, Any] | None, arch: str | None) -> int:
    """DDTREE verifies ``budget + 1`` tree nodes; the budget defaults to ``block_size - 1`` [PR #29907]."""
    block = _dflash_block(ns, draft_cfg)
    budget = _flag(ns, "speculative_ddtree_budget")
    budget = block - 1 if budget is None else int(budget)
    if budget < 1:
        raise SpecFlagError(FLAG_DDTREE_BUDGET, f"must be >= 1, got {budget}")
    return budget + 1


def _ngram_tokens(ns: Any, draft_cfg: Mapping[str, Any] | None, arch: str | None) -> int:
    return int(_flag(ns, "speculative_num_draft_tokens") or NGRAM_DEFAULT_DRAFT_TOKENS)


def eagle_auto_params(arch: str | None) -> tuple[int, int, int]:
    """SGLang's ``(steps, topk, draft tokens)`` when none of the three flags is given."""
    return EAGLE_AUTO_PARAMS_LLAMA if arch in LLAMA_LIKE_ARCHITECTURES else EAGLE_AUTO_PARAMS


def _eagle_tokens(ns: Any, draft_cfg: Mapping[str, Any] | None, arch: str | None) -> int:
    """EAGLE/EAGLE3/NEXTN/STANDALONE [V1-V4 ``_handle_speculative_decoding`` / ``_handle_eagle_family``]:

    - none of steps, topk, draft tokens set: auto-chosen by the target architecture
      (:func:`eagle_auto_params`);
    - topk == 1: ``steps + 1`` — SGLang overrides a different ``--speculative-num-draft-tokens``;
    - topk > 1: ``--speculative-num-draft-tokens`` as given; SGLang has no rule to derive it, so it
      is required (:class:`SpecFlagError` otherwise).

    Partial sets SGLang refuses with an assertion ("set all three or none") are read leniently: an
    unset topk counts as 1 and unset steps as 3, and a draft-token count with neither steps nor
    topk is taken as given.
    """
    steps = _flag(ns, "speculative_num_steps")
    topk = _flag(ns, "speculative_eagle_topk")
    draft = _flag(ns, "speculative_num_draft_tokens")
    if steps is None and topk is None:
        return int(draft) if draft else eagle_auto_params(arch)[2]
    topk = 1 if topk is None else int(topk)
    if topk == 1:
        return (3 if steps is None else int(steps)) + 1
    if not draft:
        raise SpecFlagError(
            FLAG_NUM_DRAFT_TOKENS,
            f"required with {FLAG_EAGLE_TOPK} {topk} (> 1): SGLang derives the draft-token count only "
            f"for topk 1 (steps + 1) or when {FLAG_NUM_STEPS}, {FLAG_EAGLE_TOPK} and "
            f"{FLAG_NUM_DRAFT_TOKENS} are all unset",
        )
    return int(draft)


@dataclass(frozen=True)
class SpecAlgorithm:
    """One ``--speculative-algorithm`` value and what SGLang (and this project) does with it."""

    name: str
    family: str  # FAMILY_*
    draft_checkpoint: str  # DRAFT_*: --speculative-draft-model-path required / optional / none
    # Without a draft config the planner counts the target's own MTP layers as the draft.
    mtp_fallback: bool
    draft_tokens_rule: DraftTokenRule  # tokens verified per step; see draft_token_count()
    verify_width_flag: str  # the flag that sets the verify width (what the planner shrinks)
    startup_reserve_mib: int  # added to SGLang's reserve when it picks --mem-fraction-static
    kv_fold: str  # KV_FOLD_*: how the planner folds the draft KV into the pool's cell
    sim_accept_length: float  # the stand-in's mean accept length per verify step, incl. the bonus token
    since: str  # first SGLang release / tree that has it
    provenance: str
    canonical: str = ""  # the algorithm SGLang runs it as ("" = itself; NEXTN runs as EAGLE)

    @property
    def needs_draft_model(self) -> bool:
        return self.draft_checkpoint == DRAFT_REQUIRED

    @property
    def uses_draft_model(self) -> bool:
        """Has a draft worker with weights (a checkpoint or the target's MTP layers)."""
        return self.draft_checkpoint != DRAFT_NONE

    @property
    def runs_as(self) -> str:
        return self.canonical or self.name

    def draft_tokens(
        self, ns: Any, draft_cfg: Mapping[str, Any] | None = None, arch: str | None = None
    ) -> int:
        return self.draft_tokens_rule(ns, draft_cfg, arch)


_V1 = "0.5.10.post1 [V1]"


def _eagle_family(
    name: str,
    *,
    draft_checkpoint: str,
    mtp_fallback: bool,
    startup_reserve_mib: int,
    sim_accept_length: float,
    provenance: str,
    canonical: str = "",
) -> SpecAlgorithm:
    """A row of the EAGLE family: steps x topk drafting, one token rule, layer-ratio KV fold, builtin."""
    return SpecAlgorithm(
        name=name,
        family=FAMILY_EAGLE,
        draft_checkpoint=draft_checkpoint,
        mtp_fallback=mtp_fallback,
        draft_tokens_rule=_eagle_tokens,
        verify_width_flag=FLAG_NUM_DRAFT_TOKENS,
        startup_reserve_mib=startup_reserve_mib,
        kv_fold=KV_FOLD_LAYER_RATIO,
        sim_accept_length=sim_accept_length,
        since=_V1,
        provenance=provenance,
        canonical=canonical,
    )


def _dflash_family(
    name: str,
    *,
    draft_tokens_rule: DraftTokenRule,
    verify_width_flag: str,
    sim_accept_length: float,
    since: str,
    provenance: str,
) -> SpecAlgorithm:
    """A row of the DFLASH family: a block drafter with its own checkpoint, its KV folded into the cell."""
    return SpecAlgorithm(
        name=name,
        family=FAMILY_DFLASH,
        draft_checkpoint=DRAFT_REQUIRED,
        mtp_fallback=False,
        draft_tokens_rule=draft_tokens_rule,
        verify_width_flag=verify_width_flag,
        startup_reserve_mib=4 * _GIB_MIB,
        kv_fold=KV_FOLD_DRAFT_CELL,
        sim_accept_length=sim_accept_length,
        since=since,
        provenance=provenance,
    )


SPEC_TABLE: tuple[SpecAlgorithm, ...] = (
    _eagle_family(
        "EAGLE",
        draft_checkpoint=DRAFT_REQUIRED,
        mtp_fallback=True,
        startup_reserve_mib=4 * _GIB_MIB,
        sim_accept_length=3.0,
        provenance="builtin; auto (steps, topk, draft) = (3,1,4), (5,4,8) for Llama/Grok; DeepSeek-MTP "
        "archs may draft with the target's own layers",
    ),
    _eagle_family(
        "EAGLE3",
        draft_checkpoint=DRAFT_REQUIRED,
        mtp_fallback=False,
        startup_reserve_mib=4 * _GIB_MIB,
        sim_accept_length=3.0,
        provenance="builtin; same parameters as EAGLE",
    ),
    _eagle_family(
        "NEXTN",
        draft_checkpoint=DRAFT_OPTIONAL,
        mtp_fallback=True,
        startup_reserve_mib=4 * _GIB_MIB,
        sim_accept_length=3.0,
        provenance="builtin alias of EAGLE (the target's MTP/NextN layers draft)",
        canonical="EAGLE",
    ),
    _eagle_family(
        "STANDALONE",
        draft_checkpoint=DRAFT_REQUIRED,
        mtp_fallback=False,
        startup_reserve_mib=6 * _GIB_MIB,
        sim_accept_length=2.5,
        provenance="builtin; a small draft LLM at token level; reserves 6 GiB instead of 4 at startup",
    ),
    SpecAlgorithm(
        name="NGRAM",
        family=FAMILY_NGRAM,
        draft_checkpoint=DRAFT_NONE,
        mtp_fallback=False,
        draft_tokens_rule=_ngram_tokens,
        verify_width_flag=FLAG_NUM_DRAFT_TOKENS,
        startup_reserve_mib=0,
        kv_fold=KV_FOLD_NONE,
        sim_accept_length=2.0,
        since=_V1,
        provenance="builtin (formerly lookahead); no draft model, 12 draft tokens by default; no startup "
        "reservation",
    ),
    _dflash_family(
        "DFLASH",
        draft_tokens_rule=_dflash_tokens,
        verify_width_flag=FLAG_DFLASH_BLOCK_SIZE,
        sim_accept_length=6.5,
        since="main 2026-04-07 (#22077) [V2]",
        provenance="upstream after 0.5.10.post1; verify width = block size (flag, draft config "
        "block_size, else 16)",
    ),
    _dflash_family(
        "DDTREE",
        draft_tokens_rule=_ddtree_tokens,
        verify_width_flag=FLAG_DDTREE_BUDGET,
        sim_accept_length=7.5,
        since="open PR #29907 (2026-07-02); DB-Guo fork [V3]",
        provenance="not upstream; a DFLASH draft verified as a tree of budget + 1 nodes (budget default "
        "block - 1)",
    ),
)
SPEC_BY_NAME: dict[str, SpecAlgorithm] = {a.name: a for a in SPEC_TABLE}

# Speculative algorithms this project knows (SGLang V2+ accepts any registered name; the planner
# needs one of these to size the draft).
SPEC_ALGORITHMS: tuple[str, ...] = tuple(a.name for a in SPEC_TABLE)
# SGLang 0.5.23's other SpeculativeAlgorithm members (spec_info.py): names it accepts at start that this
# project does not benchmark (no row above, so the planner cannot size them).
UNPLANNED_SPEC_ALGORITHMS: tuple[str, ...] = ("UNO", "DSPARK", "FROZEN_KV_MTP")
# Algorithms that load a separate draft checkpoint (--speculative-draft-model-path required).
DRAFT_MODEL_ALGORITHMS: frozenset[str] = frozenset(a.name for a in SPEC_TABLE if a.needs_draft_model)
# The matrix's ``algorithm`` field: "none" = autoregressive.
NO_SPEC = "none"
MATRIX_ALGORITHMS: tuple[str, ...] = (NO_SPEC, *SPEC_ALGORITHMS)


def spec_algorithm(name: str) -> SpecAlgorithm:
    """The table row for ``name`` (case-insensitive); :class:`SpecFlagError` names the flag otherwise."""
    row = SPEC_BY_NAME.get(str(name).upper())
    if row is None:
        raise SpecFlagError("--speculative-algorithm", f"{name!r} is not one of {', '.join(SPEC_ALGORITHMS)}")
    return row


def draft_token_count(ns: Any, draft_cfg: Mapping[str, Any] | None = None, arch: str | None = None) -> int:
    """Tokens verified per step (SGLang's resolved ``speculative_num_draft_tokens``); 0 without spec.

    ``ns``: the parsed launch flags (any object with SGLang's ``ServerArgs`` field names; missing
    fields count as unset). ``draft_cfg``: the draft checkpoint's ``config.json`` (DFLASH/DDTREE read
    its ``block_size``). ``arch``: the target's ``architectures[0]`` (EAGLE auto parameters).

    - DFLASH: the block size (flag, alias, draft config, else 16).
    - DDTREE: ``budget + 1`` (budget default ``block - 1``).
    - EAGLE, EAGLE3, NEXTN, STANDALONE: auto by architecture when steps/topk/draft are all unset;
      ``steps + 1`` with topk 1; with topk > 1 ``--speculative-num-draft-tokens`` is required.
    - NGRAM: ``--speculative-num-draft-tokens``, else 12.

    Raises :class:`SpecFlagError` (naming the flag) for what SGLang would reject.
    """
    algo = _flag(ns, "speculative_algorithm")
    if not algo:
        return 0
    return spec_algorithm(algo).draft_tokens(ns, draft_cfg, arch)


def startup_reserve_mib(algo: str | None) -> int:
    """MiB SGLang adds to its reserve for ``algo`` when it picks ``--mem-fraction-static`` [§2.2]."""
    if algo is None:
        return 0
    row = SPEC_BY_NAME.get(str(algo).upper())
    return row.startup_reserve_mib if row is not None else 4 * _GIB_MIB


def sim_accept_length(algo: str) -> float:
    """The stand-in's default mean accept length for ``algo``."""
    row = SPEC_BY_NAME.get(str(algo).upper())
    return row.sim_accept_length if row is not None else SIM_FALLBACK_ACCEPT_LENGTH


# ------------------------------------------------------------------------------------------------
# HTTP API paths [sglang.md §4; V1 srt/entrypoints/http_server.py]
# ------------------------------------------------------------------------------------------------

HEALTH = "/health"
HEALTH_GENERATE = "/health_generate"  # runs one generation step: ready = the scheduler answers
SERVER_INFO = "/server_info"
GET_SERVER_INFO = "/get_server_info"  # deprecated spelling, still served
MODEL_INFO = "/model_info"
GET_MODEL_INFO = "/get_model_info"
GENERATE = "/generate"
V1_MODELS = "/v1/models"
V1_COMPLETIONS = "/v1/completions"
V1_CHAT_COMPLETIONS = "/v1/chat/completions"
FLUSH_CACHE = "/flush_cache"
SET_INTERNAL_STATE = "/set_internal_state"
GET_LOAD = "/get_load"
V1_LOADS = "/v1/loads"
METRICS = "/metrics"  # only with --enable-metrics


@dataclass(frozen=True)
class HttpEndpoint:
    path: str
    methods: tuple[str, ...]
    purpose: str


ENDPOINTS: tuple[HttpEndpoint, ...] = (
    HttpEndpoint(HEALTH, ("GET", "HEAD"), "liveness; 503 until the warmup finishes"),
    HttpEndpoint(HEALTH_GENERATE, ("GET", "HEAD"), "readiness: runs one generation step"),
    HttpEndpoint(SERVER_INFO, ("GET",), "resolved server args + internal_states (accept length)"),
    HttpEndpoint(GET_SERVER_INFO, ("GET",), "deprecated spelling of /server_info"),
    HttpEndpoint(MODEL_INFO, ("GET",), "model path and type"),
    HttpEndpoint(GET_MODEL_INFO, ("GET",), "deprecated spelling of /model_info"),
    HttpEndpoint(V1_MODELS, ("GET",), "OpenAI model list"),
    HttpEndpoint(GENERATE, ("POST", "PUT"), "native generation (streams cumulative text)"),
    HttpEndpoint(V1_COMPLETIONS, ("POST",), "OpenAI completions"),
    HttpEndpoint(V1_CHAT_COMPLETIONS, ("POST",), "OpenAI chat completions"),
    HttpEndpoint(FLUSH_CACHE, ("GET", "POST"), "drop the prefix cache, reset acceptance counters"),
    HttpEndpoint(SET_INTERNAL_STATE, ("POST", "PUT"), "change server args at run time"),
    HttpEndpoint(GET_LOAD, ("GET",), "queue and running-request load"),
    HttpEndpoint(V1_LOADS, ("GET",), "newer spelling of /get_load"),
    HttpEndpoint(METRICS, ("GET",), "Prometheus metrics (--enable-metrics)"),
)
ENDPOINT_BY_PATH: dict[str, HttpEndpoint] = {e.path: e for e in ENDPOINTS}

# Which load endpoint a release serves, read in the releases' own wheels: 0.5.10.post1 routes both
# ``/get_load`` (srt/entrypoints/http_server.py) and ``/v1/loads`` (srt/entrypoints/v1_loads.py); 0.5.23
# routes only ``/v1/loads`` (``/get_load`` is 404). From the oldest release checked on, ``/v1/loads``;
# before it, ``/get_load``.
V1_LOADS_SINCE = "0.5.10.post1"


def load_endpoint(version: str | None) -> str:
    """The load endpoint of SGLang ``version`` (``/v1/loads`` when the version is unknown: the newest
    releases' only one)."""
    from .sglang_catalog import version_key  # only this needs the version order

    if not version:
        return V1_LOADS
    return V1_LOADS if version_key(version) >= version_key(V1_LOADS_SINCE) else GET_LOAD


HEALTH_ENDPOINTS: tuple[str, ...] = (HEALTH, HEALTH_GENERATE)
READY_ENDPOINT = HEALTH_GENERATE  # what the roles poll after a start
SERVER_INFO_ENDPOINTS: tuple[str, ...] = (SERVER_INFO, GET_SERVER_INFO)  # newest first
MODEL_INFO_ENDPOINTS: tuple[str, ...] = (MODEL_INFO, GET_MODEL_INFO)
AUTH_EXEMPT_ENDPOINTS: tuple[str, ...] = (*HEALTH_ENDPOINTS, METRICS)  # no API key needed [auth.py]
# The load generator's ``--api`` choices and the path each posts to.
API_PATHS: dict[str, str] = {"native": GENERATE, "openai": V1_COMPLETIONS, "openai-chat": V1_CHAT_COMPLETIONS}

# ------------------------------------------------------------------------------------------------
# Result schema ids (docs/records.md)
# ------------------------------------------------------------------------------------------------

ATTEMPT_SCHEMA = "sglbench.attempt/1"  # record.json of one config attempt
BENCH_SCHEMA = "sglbench.bench/1"  # the load generator's summary.json (record.benchmark)
POINT_SCHEMA = "sglbench.point/1"  # one finished load point of a resumable run
IDENTITY_SCHEMA = "sglbench.identity/1"  # the defining inputs of an attempt (resume hash)
# The deployment answer of one run, written by `sglbench summarize` beside the run's hosts (docs/deploy.md).
BREAKEVEN_SCHEMA = "sglbench.breakeven/1"  # breakeven.json: speculative vs baseline per load, deploy table
FRONTIER_SCHEMA = "sglbench.frontier/1"  # frontier.json: per-GPU Pareto frontier and its knee
LIMITS_SCHEMA = "sglbench.limits/1"  # limits.json: why each config's highest load is where it is
SCHEMAS: tuple[str, ...] = (
    ATTEMPT_SCHEMA,
    BENCH_SCHEMA,
    POINT_SCHEMA,
    IDENTITY_SCHEMA,
    BREAKEVEN_SCHEMA,
    FRONTIER_SCHEMA,
    LIMITS_SCHEMA,
)


# -- per-request speculative counters in /generate's meta_info ---------------------------------------------
# Which meta_info keys carry the load generator's three per-request counters, by the first release that
# returns them (read in each release's srt/managers/tokenizer_manager.py: 0.5.10, 0.5.11, 0.5.12, 0.5.13,
# 0.5.18, 0.5.20, 0.5.21, 0.5.22, 0.5.23; older catalogued releases are taken to be as 0.5.10). Every
# histogram counts verify steps by how many draft tokens were correct (index k: k correct drafts, the
# bonus token not counted). Record fields: accepted drafts, proposed drafts, the histogram.
SPEC_META_ERAS: tuple[tuple[str, dict[str, tuple[str, ...]]], ...] = (
    (
        "0",
        {
            "spec_accept_token_num": ("spec_accept_token_num",),
            "spec_draft_token_num": ("spec_draft_token_num",),
            "spec_accept_histogram": ("spec_accept_histogram",),
        },
    ),
    (
        "0.5.11",
        {
            "spec_accept_token_num": ("spec_accepted_drafts",),
            "spec_draft_token_num": ("spec_proposed_drafts",),
            "spec_accept_histogram": ("spec_accept_histogram",),
        },
    ),
    (
        "0.5.12",  # new names, the 0.5.11 ones kept as aliases
        {
            "spec_accept_token_num": ("spec_num_correct_drafts", "spec_accepted_drafts"),
            "spec_draft_token_num": ("spec_num_proposed_drafts", "spec_proposed_drafts"),
            "spec_accept_histogram": ("spec_correct_drafts_histogram", "spec_accept_histogram"),
        },
    ),
    (
        "0.5.21",
        {
            "spec_accept_token_num": ("spec_num_correct_drafts",),
            "spec_draft_token_num": ("spec_num_proposed_drafts",),
            "spec_accept_histogram": ("spec_correct_drafts_histogram",),
        },
    ),
)
# What a reader accepts for each field, newest spelling first (any release's answer reads the same).
SPEC_META_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (name, tuple(dict.fromkeys(k for _since, keys in reversed(SPEC_META_ERAS) for k in keys[name])))
    for name in SPEC_META_ERAS[0][1]
)


def spec_meta_keys(version: str) -> dict[str, tuple[str, ...]]:
    """The meta_info keys the SGLang release ``version`` returns for each record field."""
    from .sglang_catalog import version_key

    v = version_key(version.split("+", 1)[0])
    return next(dict(keys) for since, keys in reversed(SPEC_META_ERAS) if v >= version_key(since))
