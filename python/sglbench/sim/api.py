"""SGLang's HTTP API, as the stand-in serves it (field names and shapes per sglang.md §4)."""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sglbench.hostlib import sglang_facts as facts
from sglbench.hostlib.sglang_facts import spec_meta_keys
from sglbench.sim import release, textgen
from sglbench.sim.engine import Engine, SimRequest
from sglbench.sim.httpserver import Request, Response, StreamingResponse, json_response
from sglbench.sim.memory import MemoryPlan
from sglbench.sim.modelinfo import ModelFacts
from sglbench.sim.settings import SimSettings

FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)
CACHE_BLOCK = 16
_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
)
_E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)
_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    1.0,
    2.5,
)


# memory_usage.graph and startup_time.cuda_graph of SGLang 0.5.23: one entry per capture phase
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
# Fields SGLang 0.5.23's ServerArgs holds that are no launch flags (so not in the flag catalog); they
# are in /server_info and internal_states. Values as the release sets them for a plain dense model.
SERVER_ARGS_EXTRA: dict[str, Any] = {
    "_radix_eviction_policy_explicitly_set": False,
    "_speculative_draft_quantization_explicitly_set": False,
    "_swa_full_tokens_ratio_explicitly_set": False,
    "aux_hidden_state_capture": None,
    "enable_cp_tp_group_sharing": False,
    "grpc_worker_threads": 4,
    "speculative_boundary_reduction": "rs+rsv",
    "stat_loggers": None,
    "uses_mamba_radix_cache": False,
    "watermark_context_window": 4,
    "watermark_default_enabled": False,
    "watermark_enforce_all": False,
    "watermark_key": "<redacted>",
    "watermark_key_b": "<redacted>",
    "watermark_max_probability": 1.0,
    "watermark_mixing_probability": 0.5,
}
# /model_info "embedding" of 0.5.23 for a generation model (no embedding task)
EMBEDDING_INFO: dict[str, Any] = {
    "family": "none",
    "task": "none",
    "execution": "none",
    "attention": "none",
    "pooling": "model_defined",
    "normalize": False,
    "postprocessor": "none",
    "tokenizer_special_tokens": "model_default",
    "supports_dimensions": False,
    "supports_token_embeddings": False,
    "supports_multimodal": False,
    "requires_embedding_flag": False,
    "auto_enable_embedding": False,
    "bcg_eligibility": "disabled",
    "safe_disable_kv_cache": False,
    "safe_disable_radix_cache": False,
    "safe_disable_chunked_prefill": False,
    "enabled": False,
    "matryoshka_dimensions": [],
    "bcg": {
        "prefill_backend": "disabled",
        "enabled": False,
        "capture_token_budget": 4096,
        "capture_batch_sizes": [
            *range(4, 33, 4),
            *range(48, 257, 16),
            *range(288, 513, 32),
            *range(576, 1025, 64),
            *range(1280, 4097, 256),
        ],
    },
    "cache": {"kv_cache_disabled": False, "radix_cache_disabled": False, "chunked_prefill_disabled": False},
}


class ApiError(Exception):
    """A request refused before it reaches the scheduler (SGLang's tokenizer manager validation)."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.err_type = err_type


class SchedulerAbort(Exception):
    """A request the scheduler aborts (input over ``max_req_input_len``, queue full): non-streamed
    answers carry the status; a streamed /generate answers 200 and ends with an ``abort`` event."""

    def __init__(self, status: int, message: str, err_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.err_type = err_type

    @property
    def finish_reason(self) -> dict[str, Any]:
        if self.err_type is None:  # SGLang 0.5.23 _abort_on_queued_limit
            return {"type": "abort", "status_code": self.status, "message": str(self)}
        return {"type": "abort", "message": str(self), "status_code": self.status, "err_type": self.err_type}

    @property
    def status_name(self) -> str:
        return {400: "BAD_REQUEST", 503: "SERVICE_UNAVAILABLE"}.get(self.status, "INTERNAL_SERVER_ERROR")


def openai_error(status: int, message: str, err_type: str) -> Response:
    return json_response(
        {"object": "error", "message": message, "type": err_type, "param": None, "code": status}, status
    )


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1

    def render(self, name: str, labels: str) -> list[str]:
        """The sample lines (none before the first observation, as in SGLang's multiprocess registry)."""
        if not self.n:
            return []
        counts = self.counts
        lines: list[str] = []
        for bound, count in zip(self.buckets, counts, strict=True):
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.n)}')
        lines.append(f"{name}_sum{{{labels}}} {self.total}")
        lines.append(f"{name}_count{{{labels}}} {float(self.n)}")
        return lines


@dataclass(frozen=True)
class SpecConfig:
    algorithm: str
    num_draft_tokens: int
    num_steps: int
    eagle_topk: int
    accept_mean: float

    @property
    def max_tree_depth(self) -> int:
        """Tokens one verify step can keep at most (SGLang's ``max_tree_depth``): NGRAM's tree has no depth
        cap but its node budget, the EAGLE family's is num_steps + 1."""
        return self.num_draft_tokens if self.algorithm.upper() == "NGRAM" else self.num_steps + 1


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n\n"


def _sse_spaced(obj: object) -> bytes:
    """An event SGLang writes with ``json.dumps`` (default separators): the OpenAI stream's error event."""
    return b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def _sse_generate(text: str, ids_json: str, meta: dict[str, Any]) -> bytes:
    """``_sse({"text": text, "output_ids": ids, "meta_info": meta})``, byte for byte, with the ids given
    already encoded (``ids_json``: their JSON without the brackets): a stream's cumulative ids grow by a
    few per event, so each is encoded once instead of once per event."""
    dumps = json.dumps
    body = (
        f'{{"text":{dumps(text, ensure_ascii=False)},"output_ids":[{ids_json}],'
        f'"meta_info":{dumps(meta, separators=(",", ":"), ensure_ascii=False)}}}'
    )
    return b"data: " + body.encode("utf-8") + b"\n\n"


def _as_int(value: object, name: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ApiError(400, f"{name} must be an integer, got {value!r}")
    return int(value)


def _choice(key: str, value: object, reason: str | None, matched: Any) -> dict[str, Any]:
    """One OpenAI choice: ``key`` is ``text`` (completions), ``message`` or ``delta`` (chat)."""
    return {"index": 0, key: value, "logprobs": None, "finish_reason": reason, "matched_stop": matched}


@dataclass(frozen=True)
class _Envelope:
    """The fields every OpenAI answer or streamed chunk of one request starts with."""

    rid: str
    object: str
    created: int
    model: str

    def body(self, choices: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
        head = {"id": self.rid, "object": self.object, "created": self.created, "model": self.model}
        return {**head, "choices": choices, **rest}


@dataclass(frozen=True)
class _OpenAIRoute:
    """What sets /v1/completions and /v1/chat/completions apart in the flow they share."""

    chat: bool
    answer_object: str  # ``object`` of the whole answer
    chunk_object: str  # ``object`` of a streamed chunk
    default_max_new: int | None  # max_new_tokens when the request gives none (None: what fits)
    closing_usage_details: bool  # the include_usage chunk's usage carries the ``*_details``


_COMPLETIONS = _OpenAIRoute(False, "text_completion", "text_completion", 16, False)
_CHAT = _OpenAIRoute(True, "chat.completion", "chat.completion.chunk", None, True)
# the answer's one choice from its visible text, finish reason and matched stop
ChoiceOf = Callable[[str, str | None, Any], dict[str, Any]]
# the streamed chunks of a request, before the usage chunk and [DONE]
EventsOf = Callable[[SimRequest, _Envelope, bool], AsyncIterator[bytes]]


def _family(lines: list[str], name: str, kind: str, samples: list[str]) -> None:
    """A Prometheus family, written only once it has a sample (as SGLang's multiprocess registry)."""
    if samples:
        lines.extend([f"# HELP sglang:{name} {name.replace('_', ' ')}.", f"# TYPE sglang:{name} {kind}"])
        lines.extend(samples)


class SimApp:
    """Request handling for one stand-in server."""

    def __init__(
        self,
        args: argparse.Namespace,
        settings: SimSettings,
        plan: MemoryPlan,
        facts: ModelFacts,
        engine: Engine,
        spec: SpecConfig | None,
        server_args: dict[str, Any],
        log: Callable[[str], None],
        on_crash: Callable[[], None],
    ) -> None:
        self.args = args
        self.settings = settings
        self.plan = plan
        self.facts = facts
        self.engine = engine
        self.spec = spec
        self.server_args = server_args
        self.log = log
        self.on_crash = on_crash
        self.ready = False
        self.gpu_name = ""
        self.gpu_ids: list[int] = []
        self.served_model_name = args.served_model_name or args.model_path
        self.context_len = plan.context_len
        self.max_req_len = max(1, min(self.context_len - 1, plan.max_total_num_tokens - 1))
        self.max_req_input_len = max(1, self.max_req_len - 5)
        self.created = int(time.time())
        self.start_time = time.time()
        self.eos_id = facts.eos_token_ids[0] if facts.eos_token_ids else 2
        self._prefixes: set[int] = set()
        self._request_counter = 0
        self._finished_requests = 0
        self._crashing = False
        self.counters = {
            "prompt_tokens": 0,
            "generation_tokens": 0,
            "cached_tokens": 0,
            "num_requests": 0,
            "num_aborted_requests": 0,
            "spec_verify_calls": 0,
        }
        # per is_streaming label value ("true"/"false"), counted when a request finishes (as SGLang)
        self.stream_counters: dict[str, dict[str, int]] = {
            "prompt_tokens": {},
            "generation_tokens": {},
            "num_requests": {},
        }
        self.h_ttft: dict[str, Histogram] = {}
        self.h_e2e: dict[str, Histogram] = {}
        self.h_itl = Histogram(_ITL_BUCKETS)
        self.h_queue = Histogram(_E2E_BUCKETS)
        self.startup_seconds = 0.0
        self.load_weights_seconds = 0.0
        # the impersonated release follows what was checked against the real 0.5.23 (release.py)
        self.follows_contract = release.at_least(settings.sglang_version)
        self.spec_meta_keys = spec_meta_keys(settings.sglang_version)
        self.startup_available_gib = 0.0  # the summary line's available memory (set by the server)
        self.capture_bs: list[int] = []  # CUDA-graph batch sizes ([] with --disable-cuda-graph)
        self.launch_argv: list[str] = []  # the command line's flags (0.5.23's launch_command)
        engine.on_finish = self._on_finish

    # ------------------------------------------------------------------ routing
    async def handle(self, request: Request) -> Response | StreamingResponse:
        path = request.path.rstrip("/") or "/"
        authorized = request.headers.get("authorization", "") == f"Bearer {self.args.api_key}"
        if self.args.api_key and path not in facts.AUTH_EXEMPT_ENDPOINTS and not authorized:
            return json_response({"error": "Unauthorized"}, 401)
        handlers: dict[str, Callable[[Request], Any]] = {
            facts.HEALTH: self.health,
            facts.HEALTH_GENERATE: self.health,
            facts.SERVER_INFO: self.server_info,
            facts.GET_SERVER_INFO: self.server_info,
            facts.MODEL_INFO: self.model_info,
            facts.GET_MODEL_INFO: self.model_info,
            facts.V1_MODELS: self.models,
            facts.GENERATE: self.generate,
            facts.V1_COMPLETIONS: self.completions,
            facts.V1_CHAT_COMPLETIONS: self.chat_completions,
            facts.FLUSH_CACHE: self.flush_cache,
            facts.SET_INTERNAL_STATE: self.set_internal_state,
            facts.V1_LOADS: self.v1_loads,
        }
        if not self.follows_contract:  # releases before 0.5.23 answered /get_load (404 on 0.5.23)
            handlers[facts.GET_LOAD] = self.get_load
        routes = {p: (facts.ENDPOINT_BY_PATH[p].methods, func) for p, func in handlers.items()}
        if path == facts.METRICS and self.args.enable_metrics:
            return await self.metrics(request)
        if path not in routes:
            return json_response({"detail": "Not Found"}, 404)
        methods, func = routes[path]
        if request.method not in methods:
            return json_response({"detail": "Method Not Allowed"}, 405)
        try:
            return await func(request)
        except ApiError as exc:
            self.log(f"[http_server] Error: {exc}")
            if path == facts.GENERATE:
                return json_response({"error": {"message": str(exc)}}, exc.status)
            return openai_error(exc.status, str(exc), exc.err_type)
        except SchedulerAbort as exc:
            self.log(f"[http_server] Error: {exc}")
            if path == facts.GENERATE:
                return json_response({"error": {"message": str(exc)}}, exc.status)
            return openai_error(exc.status, str(exc), exc.err_type or "ServiceUnavailableError")

    def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"Invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "The request body must be a JSON object")
        return body

    # ------------------------------------------------------------------ generation core
    def _cached(self, ids: list[int]) -> int:
        if self.args.disable_radix_cache:
            return 0
        best = 0
        h = 0
        for end in range(CACHE_BLOCK, len(ids), CACHE_BLOCK):
            h = hash((h, tuple(ids[end - CACHE_BLOCK : end])))
            if h in self._prefixes:
                best = end
            else:
                self._prefixes.add(h)
        if len(self._prefixes) > 1_000_000:
            self._prefixes.clear()
        return best

    def _check_fault(self) -> None:
        self._request_counter += 1
        rate = self.settings.error_rate
        if rate > 0 and random.Random(f"{self.settings.seed}:err:{self._request_counter}").random() < rate:
            raise ApiError(
                500,
                "Internal server error (sglbench sim: injected by SGLBENCH_SIM_ERROR_RATE)",
                "InternalServerError",
            )

    def _new_request(
        self,
        prompt_ids: list[int],
        sp: dict[str, Any],
        *,
        default_max_new: int | None,
        is_health: bool = False,
    ) -> SimRequest:
        if not isinstance(sp, dict):
            raise ApiError(400, "sampling_params must be an object")
        n_prompt = len(prompt_ids)
        if n_prompt == 0 and not is_health:
            raise ApiError(400, "The input is empty (0 tokens); send text or input_ids")
        # SGLang 0.5.23, in this order: the tokenizer manager checks the input against the model's
        # context, then input + max_new_tokens; the scheduler checks the input against
        # max_req_input_len (= min(context, KV pool) - 6) and caps max_new_tokens at
        # max_req_len - input - 1 (max_req_len = min(context, KV pool) - 1).
        if n_prompt >= self.context_len:
            raise ApiError(
                400,
                f"The input ({n_prompt} tokens) is longer than the model's context length "
                f"({self.context_len} tokens).",
            )
        max_new = _as_int(sp.get("max_new_tokens"), "max_new_tokens", default_max_new)
        if max_new is not None and max_new < 0:
            raise ApiError(400, f"max_new_tokens must be >= 0, got {max_new}")
        if max_new is not None and n_prompt + max_new > self.context_len:
            raise ApiError(
                400,
                f"Requested token count exceeds the model's maximum context length of {self.context_len} "
                "tokens. "
                f"You requested a total of {n_prompt + max_new} tokens: {n_prompt} tokens from the input "
                "messages "
                f"and {max_new} tokens for the completion. Please reduce the number of tokens in the input "
                "messages or the completion to fit within the limit.",
            )
        if n_prompt >= self.max_req_input_len and not is_health:
            message = (
                f"Input length ({n_prompt} tokens) exceeds the maximum allowed length "
                f"({self.max_req_input_len} tokens). Use a shorter input or enable --allow-auto-truncate."
            )
            self.log(f"{message}, self.rid='{uuid.uuid4().hex}'")
            raise SchedulerAbort(400, message, "BadRequestError")
        room = max(0, self.max_req_len - n_prompt - 1)
        max_new = room if max_new is None else min(max_new, room)
        key = textgen.request_key(prompt_ids, sp.get("sampling_seed"))
        sampler = None
        fixed_token = None
        if self.spec is not None and self.settings.simulate_acc_len is not None:
            # SGLang's SGLANG_SIMULATE_ACC_LEN: forced accept lengths; token mode `fixed` replaces every
            # verified token (accepted drafts and the bonus) with one id
            sampler = textgen.SimulatedAcceptSampler(
                self.settings.seed,
                key,
                self.spec.max_tree_depth,
                self.settings.simulate_acc_len,
                self.settings.simulate_acc_method,
            )
            if self.settings.simulate_acc_token_mode == "fixed":
                fixed_token = textgen.SIMULATED_FIXED_TOKEN
        elif self.spec is not None:
            sampler = textgen.AcceptSampler(
                self.settings.seed,
                key,
                self.spec.num_draft_tokens,
                self.spec.accept_mean,
                self.settings.accept_dist,
            )
        # SGLBENCH_SIM_DIVERGE: this speculative request returns other tokens than the baseline would.
        diverge = self.settings.diverge if self.spec is not None and not is_health else None
        diverge_at = None
        if diverge is not None and textgen.diverges(self.settings.seed, key, diverge.share):
            diverge_at = diverge.position
        stop_ids = sp.get("stop_token_ids") or []
        stop = sp.get("stop")
        stops = [stop] if isinstance(stop, str) else (stop if isinstance(stop, list) else [])
        stop_strings = tuple(x for x in stops if isinstance(x, str) and x)
        req = SimRequest(
            rid=str(sp.get("_rid") or uuid.uuid4().hex),
            prompt_ids=list(prompt_ids),
            max_new_tokens=max_new,
            ignore_eos=bool(sp.get("ignore_eos", False)),
            generator=textgen.Generator(self.settings.seed, key, self.settings.output_len, diverge_at),
            sampler=sampler,
            fixed_token=fixed_token,
            eos_id=self.eos_id,
            stop_token_ids=frozenset(int(x) for x in stop_ids if isinstance(x, int)),
            stop_strings=stop_strings,
            is_health=is_health,
        )
        req.cached_tokens = 0 if is_health else self._cached(req.prompt_ids)
        if max_new == 0:
            req.finish_reason = {"type": "length", "length": 0}
            req.finished_time = req.created
        return req

    def _check_queue(self) -> None:
        limit = self.args.max_queued_requests
        if limit is not None and len(self.engine.waiting) >= limit:
            raise SchedulerAbort(503, "The request queue is full.")

    def _submit(self, req: SimRequest) -> None:
        if not req.is_health:
            self.counters["num_requests"] += 1
            self.counters["prompt_tokens"] += len(req.prompt_ids)
            self.counters["cached_tokens"] += req.cached_tokens
        if req.done:
            req.events.put_nowait("update")
            if not req.is_health:
                self._on_finish(req)
        else:
            self.engine.submit(req)

    def _on_finish(self, req: SimRequest) -> None:
        if req.is_health:
            return
        self.counters["generation_tokens"] += len(req.output_ids)
        self.counters["spec_verify_calls"] += req.verify_ct
        flag = "true" if req.stream else "false"
        for key, value in (
            ("prompt_tokens", len(req.prompt_ids)),
            ("generation_tokens", len(req.output_ids)),
            ("num_requests", 1),
        ):
            self.stream_counters[key][flag] = self.stream_counters[key].get(flag, 0) + value
        end = req.finished_time or time.monotonic()
        self.h_e2e.setdefault(flag, Histogram(_E2E_BUCKETS)).observe(end - req.created)
        self.h_queue.observe(max(0.0, (req.admitted_time or req.created) - req.created))
        if req.first_token_time is not None:
            self.h_ttft.setdefault(flag, Histogram(_TTFT_BUCKETS)).observe(req.first_token_time - req.created)
            if len(req.output_ids) > 1:
                self.h_itl.observe((end - req.first_token_time) / (len(req.output_ids) - 1))
        self._finished_requests += 1
        limit = self.settings.crash_after_requests
        if limit and self._finished_requests >= limit and not self._crashing:
            self._crashing = True
            self.on_crash()

    def _observe(self, req: SimRequest) -> None:
        """Finish a request whose text reached one of its stop strings (SGLang: finish_reason stop)."""
        if req.done or not req.stop_strings:
            return
        text = textgen.decode(req.output_ids)
        hits = [(pos, stop) for stop in req.stop_strings if (pos := text.find(stop)) >= 0]
        if hits:
            req.finish_reason = {"type": "stop", "matched": min(hits)[1]}
            req.finished_time = time.monotonic()
            req.cancelled = True  # the engine drops it; account for it here
            self._on_finish(req)

    async def _wait_done(self, req: SimRequest) -> None:
        while not req.done:
            await req.events.get()
            self._observe(req)

    async def _updates(self, req: SimRequest) -> AsyncIterator[None]:
        """Yield after every engine update until the request is finished (coalescing backlog)."""
        while True:
            await req.events.get()
            while not req.events.empty():
                req.events.get_nowait()
            self._observe(req)
            yield None
            if req.done:
                return

    def _text_of(self, req: SimRequest, memo: textgen.DecodedText | None = None) -> str:
        """Visible text: EOS not shown, cut before a matched stop string. A stream passes its ``memo`` so
        each chunk decodes only the new tokens."""
        ids = req.output_ids
        text = memo.of(ids) if memo is not None else textgen.decode(ids)
        reason = req.finish_reason or {}
        if ids and ids[-1] == req.eos_id and reason.get("type") == "stop":
            text = text[: len(text) - len(textgen.decode_token(ids[-1]))]
        matched = reason.get("matched")
        if isinstance(matched, str) and matched in text:
            text = text[: text.find(matched)]
        return text

    def _spec_meta(self, req: SimRequest, meta: dict[str, Any]) -> None:
        # Every catalogued release adds the speculative counters only when the request finished after at
        # least one verify step (tokenizer_manager's _calculate_spec_decoding_metrics), never mid-stream.
        if self.spec is None or not req.done or not req.verify_ct:
            return
        accepted = sum((n - 1) * c for n, c in req.accept_hist.items())
        draft = req.verify_ct * max(1, self.spec.num_draft_tokens - 1)
        # verify steps by correct drafts (tokens kept - 1), grown on demand as 0.5.23's
        # Req.update_spec_correct_drafts_histogram: its length is the largest count seen + 1
        hist = [0] * max(req.accept_hist)
        for n, c in req.accept_hist.items():
            hist[n - 1] += c
        meta["spec_accept_rate"] = accepted / draft
        meta["spec_accept_length"] = len(req.output_ids) / req.verify_ct
        meta["spec_verify_ct"] = req.verify_ct
        values = {
            "spec_accept_token_num": accepted,
            "spec_draft_token_num": draft,
            "spec_accept_histogram": hist,
        }
        for field_name, keys in self.spec_meta_keys.items():  # the impersonated release's spelling
            for k in keys:
                meta[k] = values[field_name]

    def _wall(self, mono: float) -> float:
        """A monotonic instant as a Unix timestamp (SGLang reports wall-clock ``*_ts`` / ``*_time``)."""
        return self.start_time + (mono - self._mono0())

    def _meta(self, req: SimRequest) -> dict[str, Any]:
        """``meta_info`` with SGLang 0.5.23's keys: a streamed chunk before the last one carries the
        first group only; the final one adds ``weight_versions``, ``e2e_latency`` and, with
        ``--enable-metrics``, the request's timestamps, first-token latency and decode throughput."""
        done = req.done
        first = req.first_token_time or req.created
        end = req.finished_time or time.monotonic()
        n_out = len(req.output_ids)
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": req.finish_reason if done else None,
            "prompt_tokens": len(req.prompt_ids),
            "weight_version": "default",
            "num_retractions": 0,
            "storage_prefetch_wait": 0.0,
            "storage_staging_wait": 0.0,
            "forward_entry_time": self._wall(req.created),
            "prefill_finished_time": self._wall(first),
            "queue_time": max(0.0, (req.admitted_time or req.created) - req.created),
            "reasoning_tokens": 0,
            "completion_tokens": n_out,
            "cached_tokens": req.cached_tokens,
        }
        if done:
            meta["weight_versions"] = [{"version": "default", "start": 0, "end": n_out}]
        meta["cached_tokens_details"] = (
            {"device": req.cached_tokens, "host": 0} if req.cached_tokens else None
        )
        meta["dp_rank"] = None
        if done:
            meta["e2e_latency"] = end - req.created
        self._spec_meta(req, meta)
        if self.args.enable_metrics and done:
            wall0 = self._wall(req.created)
            meta["request_received_ts"] = wall0
            if req.first_token_time is not None:
                meta["first_token_latency"] = first - req.created
            meta["api_server_dispatch_finish_ts"] = wall0
            meta["request_finished_ts"] = self._wall(end)
            if n_out > 1 and end > first:
                meta["decode_throughput"] = (n_out - 1) / (end - first)
        meta["response_sent_to_client_ts"] = time.time()
        return meta

    def _abort_meta(self, abort: SchedulerAbort, n_prompt: int) -> dict[str, Any]:
        """The one event a streamed /generate gets when the scheduler aborts it (0.5.23)."""
        rid = uuid.uuid4().hex
        if abort.status == 503:  # queue full: aborted before it was scheduled
            return {
                "id": rid,
                "finish_reason": abort.finish_reason,
                "weight_version": "default",
                "e2e_latency": 0.0,
                "weight_versions": [{"version": "default", "start": 0, "end": 0}],
                "completion_tokens": 0,
                "response_sent_to_client_ts": time.time(),
            }
        now = time.time()
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": abort.finish_reason,
            # what 0.5.23 reports for a request the scheduler refused: one prompt token, one output
            "prompt_tokens": 1,
            "weight_version": "default",
            "num_retractions": 0,
            "storage_prefetch_wait": 0.0,
            "storage_staging_wait": 0.0,
            "forward_entry_time": now,
            "prefill_finished_time": now,
            "queue_time": 0.0,
            "reasoning_tokens": 0,
            "completion_tokens": 1,
            "cached_tokens": 0,
            "weight_versions": [{"version": "default", "start": 0, "end": 1}],
            "cached_tokens_details": None,
            "dp_rank": None,
            "e2e_latency": 0.0,
        }
        if self.args.enable_metrics:
            meta.update(
                {
                    "request_received_ts": now,
                    "first_token_latency": 0.0,
                    "api_server_dispatch_finish_ts": now,
                    "request_finished_ts": now,
                }
            )
        meta["response_sent_to_client_ts"] = now
        return meta

    _mono_at_start: float | None = None

    def _mono0(self) -> float:
        if self._mono_at_start is None:
            self._mono_at_start = time.monotonic() - (time.time() - self.start_time)
        return self._mono_at_start

    # ------------------------------------------------------------------ endpoints
    async def health(self, request: Request) -> Response:
        if not self.ready:
            return Response(503, b"", "text/plain")
        if self.engine.running:  # like SGLang: a busy server is healthy when tokens are flowing
            return Response(200, b"", "text/plain")
        req = self._new_request(
            [1], {"max_new_tokens": 1, "temperature": 0}, default_max_new=1, is_health=True
        )
        self._submit(req)
        await self._wait_done(req)
        return Response(200, b"", "text/plain")

    async def generate(self, request: Request) -> Response | StreamingResponse:
        body = self._body(request)
        prompts, batch = self._generate_prompts(body)
        sp = body.get("sampling_params") or {}
        stream = bool(body.get("stream", False))
        if batch and stream:
            raise ApiError(400, "sglbench sim: streaming a batch /generate request is not supported")
        self._check_fault()
        sps = sp if isinstance(sp, list) else [sp] * len(prompts)
        rids = body.get("rid")
        if isinstance(rids, str) and not batch:
            sps = [{**sps[0], "_rid": rids}] if isinstance(sps[0], dict) else sps
        if stream:
            req = self._start_generate_stream(prompts[0], sps[0])
            if isinstance(req, StreamingResponse):
                return req
            interval = max(1, int(sp.get("stream_interval") or self.args.stream_interval or 1))
            return self._stream(self._generate_events(req, interval), req)
        self._check_queue()
        reqs = [self._new_request(p, s, default_max_new=128) for p, s in zip(prompts, sps, strict=False)]
        for req in reqs:
            self._submit(req)
        out = [await self._generate_answer(req) for req in reqs]
        return json_response(out if batch else out[0])

    def _generate_prompts(self, body: dict[str, Any]) -> tuple[list[list[int]], bool]:
        """The prompts of a /generate body as token ids, and whether it is a batch request."""
        text, input_ids = body.get("text"), body.get("input_ids")
        if text is None and input_ids is None:
            raise ApiError(400, "Either text, input_ids or input_embeds should be provided.")
        if input_ids is not None:  # SGLang uses the ids when both are given
            if isinstance(input_ids, list) and all(isinstance(i, int) for i in input_ids):
                return [list(input_ids)], False
            if isinstance(input_ids, list) and all(isinstance(i, list) for i in input_ids):
                return [list(x) for x in input_ids], True
            raise ApiError(400, "input_ids must be a list of ints or a list of lists of ints")
        if isinstance(text, str):
            return [textgen.encode(text, self.facts.vocab_size)], False
        if isinstance(text, list) and all(isinstance(t, str) for t in text):
            return [textgen.encode(t, self.facts.vocab_size) for t in text], True
        raise ApiError(400, "text must be a string or a list of strings")

    def _start_generate_stream(self, prompt_ids: list[int], sp: Any) -> SimRequest | StreamingResponse:
        """Check and submit a streamed /generate. It has sent its 200 before anything is checked: a
        refused request ends the event stream with an error event, an aborted one with an ``abort``
        chunk (returned here, not raised)."""
        try:
            self._check_queue()
            req = self._new_request(prompt_ids, sp, default_max_new=128)
            req.stream = True
        except ApiError as exc:
            self.log(f"[http_server] Error: {exc}")
            event = {"message": str(exc), "type": "invalid_request_error", "code": exc.status}
            return self._sse_response([_sse({"error": {**event, "retryable": False}}), SSE_DONE])
        except SchedulerAbort as exc:
            self.log(f"[http_server] Error: {exc}")
            aborted = {"text": "", "output_ids": [], "meta_info": self._abort_meta(exc, len(prompt_ids))}
            if exc.status != 503:
                aborted["output_ids"] = [self.eos_id]
            return self._sse_response([_sse(aborted), SSE_DONE])
        self._submit(req)
        return req

    async def _generate_answer(self, req: SimRequest) -> dict[str, Any]:
        """One finished request of a non-streamed /generate."""
        await self._wait_done(req)
        return {"text": self._text_of(req), "output_ids": req.output_ids, "meta_info": self._meta(req)}

    async def _generate_events(self, req: SimRequest, interval: int) -> AsyncIterator[bytes]:
        """A streamed /generate: one event every ``interval`` tokens and at the end, the whole text so
        far (or, with ``--incremental-streaming-output``, what is new)."""
        incremental = bool(self.args.incremental_streaming_output)
        sent_ids = 0
        sent_text = ""
        memo = textgen.DecodedText()
        ids_json = ""  # the JSON of output_ids[:sent_ids], without brackets
        async for _ in self._updates(req):
            if not req.done and len(req.output_ids) - sent_ids < interval:
                continue
            text_now = self._text_of(req, memo)
            new_ids = req.output_ids[sent_ids:]
            if incremental:
                event = _sse(
                    {"text": text_now[len(sent_text) :], "output_ids": new_ids, "meta_info": self._meta(req)}
                )
            else:
                if new_ids:
                    more = ",".join(map(str, new_ids))
                    ids_json = f"{ids_json},{more}" if ids_json else more
                event = _sse_generate(text_now, ids_json, self._meta(req))
            sent_ids, sent_text = len(req.output_ids), text_now
            yield event
        yield SSE_DONE

    def _stream(self, events: AsyncIterator[bytes], req: SimRequest) -> StreamingResponse:
        """A streamed answer; a client that goes away aborts its request."""
        return StreamingResponse(events, on_disconnect=lambda: self._abort(req))

    @staticmethod
    def _sse_response(events: list[bytes]) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            for event in events:
                yield event

        return StreamingResponse(chunks())

    def _abort(self, req: SimRequest) -> None:
        if not req.done:
            req.cancelled = True
            self.counters["num_aborted_requests"] += 1

    # ---------------------------------------------------------------- OpenAI-compatible
    def _usage(self, req: SimRequest, *, details: bool = True) -> dict[str, Any]:
        """``usage``; the closing chunk of a streamed /v1/completions has no ``*_details`` (0.5.23)."""
        prompt, completion = len(req.prompt_ids), len(req.output_ids)
        usage: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion}
        usage["completion_tokens"] = completion
        if details:
            usage["prompt_tokens_details"] = (
                {"cached_tokens": req.cached_tokens} if self.args.enable_cache_report else None
            )
        usage["reasoning_tokens"] = 0
        if details:
            usage["completion_tokens_details"] = None
        return usage

    @staticmethod
    def _metadata(req: SimRequest) -> dict[str, Any]:
        n_out = len(req.output_ids)
        return {
            "weight_version": "default",
            "weight_versions": [{"version": "default", "start": 0, "end": n_out}],
        }

    async def _openai_submit(
        self, ids: list[int], sp: dict[str, Any], default_max_new: int | None, stream: bool
    ) -> SimRequest | StreamingResponse:
        """Validate and submit; for a streamed request the scheduler's refusal comes as an error event
        after the 200 (what 0.5.23 does), so it is returned instead of raised."""
        self._check_fault()
        try:
            self._check_queue()
            req = self._new_request(ids, sp, default_max_new=default_max_new)
        except SchedulerAbort as exc:
            if not stream:
                raise
            self.log(f"[http_server] Error: {exc}")
            event = {"object": "error", "message": str(exc), "type": exc.status_name, "param": None}
            return self._sse_response([_sse_spaced({"error": {**event, "code": exc.status}}), SSE_DONE])
        req.stream = stream
        self._submit(req)
        return req

    @staticmethod
    def _openai_finish(req: SimRequest) -> tuple[str | None, Any]:
        if not req.done:
            return None, None
        reason = req.finish_reason or {}
        if reason.get("type") == "length":
            return "length", None
        return "stop", reason.get("matched")

    def _openai_params(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        if "model" in body and not isinstance(body["model"], str):
            raise ApiError(400, "model must be a string")
        max_tokens = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        if max_tokens is None and not chat:
            max_tokens = 16
        n = body.get("n", 1)
        if n not in (1, None):
            raise ApiError(400, "sglbench sim: only n=1 is supported")
        sp = {
            "stop": body.get("stop"),
            "max_new_tokens": max_tokens,
            "ignore_eos": bool(body.get("ignore_eos", False)),
            "stop_token_ids": body.get("stop_token_ids"),
            "sampling_seed": body.get("seed"),
        }
        return sp

    async def _openai_reply(
        self, body: dict[str, Any], ids: list[int], route: _OpenAIRoute, choice: ChoiceOf, events: EventsOf
    ) -> Response | StreamingResponse:
        """The flow both OpenAI endpoints share: parameters, submission, then the whole answer or the
        stream (``events`` for the request's chunks, then the usage chunk if asked for and ``[DONE]``)."""
        sp = self._openai_params(body, chat=route.chat)
        stream = bool(body.get("stream"))
        req = await self._openai_submit(ids, sp, route.default_max_new, stream)
        if isinstance(req, StreamingResponse):
            return req
        created = int(time.time())
        model = body.get("model") or self.served_model_name
        if not stream:
            await self._wait_done(req)
            text = self._text_of(req)
            reason, matched = self._openai_finish(req)
            answer = _Envelope(req.rid, route.answer_object, created, model)
            return json_response(
                answer.body(
                    [choice(text, reason, matched)], usage=self._usage(req), metadata=self._metadata(req)
                )
            )
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        envelope = _Envelope(req.rid, route.chunk_object, created, model)
        chunks = events(req, envelope, continuous)
        return self._stream(self._openai_stream(req, envelope, chunks, route, include_usage), req)

    async def _openai_stream(
        self,
        req: SimRequest,
        envelope: _Envelope,
        chunks: AsyncIterator[bytes],
        route: _OpenAIRoute,
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            yield chunk
        if include_usage:
            yield _sse(envelope.body([], usage=self._usage(req, details=route.closing_usage_details)))
        yield SSE_DONE

    async def completions(self, request: Request) -> Response | StreamingResponse:
        body = self._body(request)
        ids, echo = self._completion_prompt(body)

        def choice(text: str, reason: str | None, matched: Any) -> dict[str, Any]:
            return _choice("text", echo + text, reason, matched)

        return await self._openai_reply(body, ids, _COMPLETIONS, choice, self._completion_chunks)

    def _completion_prompt(self, body: dict[str, Any]) -> tuple[list[int], str]:
        """The prompt's token ids, and what an ``echo`` request gets back before its completion."""
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return textgen.encode(prompt, self.facts.vocab_size), prompt if body.get("echo") else ""
        if isinstance(prompt, list) and all(isinstance(i, int) for i in prompt):
            return list(prompt), ""
        raise ApiError(400, "prompt must be a string or a list of token ids (one prompt per request)")

    async def _completion_chunks(
        self, req: SimRequest, envelope: _Envelope, continuous: bool
    ) -> AsyncIterator[bytes]:
        """A streamed /v1/completions: one chunk per new text, the last one with its finish reason."""
        sent = ""
        memo = textgen.DecodedText()
        async for _ in self._updates(req):
            text = self._text_of(req, memo)
            reason, matched = self._openai_finish(req)
            delta = text[len(sent) :]
            sent = text
            if not delta and reason is None:
                continue
            usage = self._usage(req, details=False) if continuous else None
            yield _sse(envelope.body([_choice("text", delta, reason, matched)], usage=usage))
            if reason is not None:
                break

    def _chat_prompt(self, messages: object) -> str:
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        parts = []
        for msg in messages:
            if not isinstance(msg, dict) or "role" not in msg:
                raise ApiError(400, "each message needs a role and content")
            content = msg.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(f"<|im_start|>{msg['role']}\n{content or ''}<|im_end|>\n")
        parts.append("<|im_start|>assistant\n")
        return "".join(parts)

    async def chat_completions(self, request: Request) -> Response | StreamingResponse:
        body = self._body(request)
        ids = textgen.encode(self._chat_prompt(body.get("messages")), self.facts.vocab_size)

        def choice(text: str, reason: str | None, matched: Any) -> dict[str, Any]:
            message = {"role": "assistant", "content": text.lstrip(), "reasoning_content": None}
            return _choice("message", message, reason, matched)

        return await self._openai_reply(body, ids, _CHAT, choice, self._chat_chunks)

    async def _chat_chunks(
        self, req: SimRequest, envelope: _Envelope, continuous: bool
    ) -> AsyncIterator[bytes]:
        """A streamed /v1/chat/completions: the role, one chunk per new text, then the finish reason.
        As 0.5.23: every delta carries reasoning_content; no "usage" key unless continuous usage stats
        were asked for, and then only on the content chunks."""

        def chunk(
            delta: dict[str, Any], reason: str | None = None, matched: Any = None, usage: bool = False
        ) -> bytes:
            extra = {"usage": self._usage(req)} if usage else {}
            return _sse(
                envelope.body(
                    [_choice("delta", {"reasoning_content": None, **delta}, reason, matched)], **extra
                )
            )

        yield chunk({"role": "assistant", "content": ""})
        sent = ""
        memo = textgen.DecodedText()
        async for _ in self._updates(req):
            text = self._text_of(req, memo).lstrip()
            delta = text[len(sent) :]
            sent = text
            if delta:
                yield chunk({"content": delta}, usage=continuous)
            if req.done:
                reason, matched = self._openai_finish(req)
                yield chunk({}, reason, matched)
                break

    # ------------------------------------------------------------------ info endpoints
    def _graph_gib(self) -> float | dict[str, float]:
        """``memory_usage.graph``: 0.5.23 splits it per capture phase; older releases, one number."""
        total = round(self.plan.cuda_graph_gib, 2)
        if not self.follows_contract:
            return total
        phases = dict.fromkeys(GRAPH_PHASES, 0.0)
        if self.spec is not None:
            phases["target_verify"] = round(total / 2, 3)
            phases["draft_decode"] = round(total - total / 2, 3)
        else:
            phases["decode"] = total
        return phases

    def _startup_time(self, *, tokenizer: bool) -> dict[str, Any]:
        graph = dict.fromkeys(GRAPH_PHASES, 0.0)
        out: dict[str, Any] = {
            "load_weight": self.load_weights_seconds,
            "kv_cache_allocation": 0.0,
            "scheduler_e2e": self.startup_seconds,
            "cuda_graph": graph,
        }
        if tokenizer:
            out["tokenizer_e2e"] = self.startup_seconds
        return out

    def internal_state(self) -> dict[str, Any]:
        state = dict(self.server_args)
        if self.plan.mamba_slots is not None:
            state["max_mamba_cache_size"] = self.plan.mamba_slots
        state["last_gen_throughput"] = self.engine.last_gen_throughput
        memory: dict[str, Any] = {
            "weight": round(self.plan.weights_gib, 2),
            "kvcache": round(self.plan.k_size_gib + self.plan.v_size_gib, 2),
        }
        if self.follows_contract:
            memory["startup_available"] = round(self.startup_available_gib, 3)
        memory["token_capacity"] = self.plan.max_total_num_tokens
        if self.follows_contract:
            memory["token_capacity_swa"] = None
        memory["graph"] = self._graph_gib()
        state["memory_usage"] = memory
        state["effective_max_running_requests_per_dp"] = self.plan.max_running_requests
        if self.follows_contract:
            state.update(SERVER_ARGS_EXTRA)
            state["world_size"] = int(self.args.tp_size) * int(getattr(self.args, "pp_size", 1) or 1)
            state["decode_cuda_graph_bs"] = list(self.capture_bs)
            state["decode_cuda_graph_memory_gb"] = (
                0.0 if not self.capture_bs else round(self.plan.cuda_graph_gib, 2)
            )
            state["startup_time"] = self._startup_time(tokenizer=False)
        if self.spec is not None and self.engine.avg_spec_accept_length is not None:
            state["avg_spec_accept_length"] = self.engine.avg_spec_accept_length
        return state

    def server_info_dict(self) -> dict[str, Any]:
        info = dict(self.server_args)
        if self.follows_contract:
            info.update(SERVER_ARGS_EXTRA)
            info.update(
                {
                    "launch_command": " ".join(self.launch_argv),
                    "frontend": "python",
                    "kv_events": None,
                    "custom_sigquit_handler": None,
                    "hicache_object_layout": {
                        "enabled": False,
                        "backend": None,
                        "page_size": self.plan.page_size,
                        "hicache_object_layout": {"pools": []},
                        "reason": "Hierarchical cache is disabled",
                    },
                    "startup_time": self._startup_time(tokenizer=True),
                }
            )
        info.update(
            {
                "status": "ready" if self.ready else "starting",
                "max_total_num_tokens": self.plan.max_total_num_tokens,
                "max_req_input_len": self.max_req_input_len,
                "internal_states": [self.internal_state()],
                "version": self.settings.sglang_version,
                "sglbench_sim": {
                    "simulated": True,
                    "time_scale": self.settings.time_scale,
                    # the release impersonated (= "version") and the flag catalog it parses with
                    "impersonates": self.settings.sglang_version,
                    "flags_release": self.settings.sglang_release,
                    "accounting": self.plan.accounting,
                    "gpu": self.gpu_name,
                    "gpu_ids": self.gpu_ids,
                    "lag_seconds": round(self.engine.lag_seconds, 3),
                },
            }
        )
        return info

    async def server_info(self, request: Request) -> Response:
        return json_response(self.server_info_dict())

    async def model_info(self, request: Request) -> Response:
        info: dict[str, Any] = {
            "model_path": self.args.model_path,
            "served_model_name": self.served_model_name,
            "tokenizer_path": self.args.tokenizer_path or self.args.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": self.server_args.get("load_format", "auto"),
            "reasoning_parser": self.server_args.get("reasoning_parser"),
            "tool_call_parser": self.server_args.get("tool_call_parser"),
            "disaggregation_mode": self.server_args.get("disaggregation_mode", "null"),
            "has_image_understanding": self.facts.has_image_understanding,
            "has_audio_understanding": False,
            "model_type": self.facts.model_type,
            "architectures": [self.facts.architecture],
        }
        if self.follows_contract:
            info["embedding"] = json.loads(json.dumps(EMBEDDING_INFO))  # a copy
        info["sglbench_simulated"] = True
        return json_response(info)

    async def models(self, request: Request) -> Response:
        return json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.served_model_name,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "sglang",
                        "root": self.served_model_name,
                        "parent": None,
                        "max_model_len": self.context_len,
                    }
                ],
            }
        )

    async def flush_cache(self, request: Request) -> Response:
        if self.engine.running or self.engine.waiting:
            return Response(
                400,
                b"Cache not flushed. Please check backend logs for more details. (When there "
                b"are running or waiting requests, the operation will not be performed.)\n",
                "text/plain; charset=utf-8",
            )
        self._prefixes.clear()
        self.log("Cache flushed successfully!")
        return Response(200, FLUSH_TEXT.encode(), "text/plain; charset=utf-8")

    async def set_internal_state(self, request: Request) -> Response:
        body = self._body(request)
        allowed = {
            "pp_max_micro_batch_size",
            "speculative_accept_threshold_single",
            "speculative_accept_threshold_acc",
        }
        server_args = body.get("server_args") or {}
        bad = sorted(set(server_args) - allowed) if isinstance(server_args, dict) else ["server_args"]
        if bad:
            return json_response(
                {
                    "updated": False,
                    "server_args": self.server_args,
                    "message": f"Setting {bad} is not allowed",
                },
                400,
            )
        self.engine.reset_spec_stats()
        return json_response({"updated": True, "server_args": dict(self.server_args)})

    async def get_load(self, request: Request) -> Response:
        """``/get_load`` of releases before 0.5.23 (which answers it 404)."""
        return json_response(
            [
                {
                    "num_reqs": len(self.engine.running) + len(self.engine.waiting),
                    "num_waiting_reqs": len(self.engine.waiting),
                    "num_tokens": self.engine.used_tokens,
                    "dp_rank": 0,
                }
            ]
        )

    async def v1_loads(self, request: Request) -> Response:
        """``/v1/loads`` as 0.5.23 answers it: one entry per DP rank under ``loads``."""
        eng = self.engine
        cap = max(1, self.plan.max_total_num_tokens)
        used = eng.used_tokens
        waiting_tokens = sum(len(r.prompt_ids) - r.cached_tokens for r in eng.waiting)
        active = used + sum(len(r.prompt_ids) for r in eng.waiting)
        load = {
            "timestamp": time.time(),
            "dp_rank": 0,
            "num_running_reqs": len(eng.running),
            "num_waiting_reqs": len(eng.waiting),
            "num_waiting_uncached_tokens": waiting_tokens,
            "num_used_tokens": used,
            "num_total_tokens": active,
            "num_active_tokens": active,
            "num_prealloc_ready_tokens": 0,
            "max_total_num_tokens": self.plan.max_total_num_tokens,
            "max_running_requests": self.plan.max_running_requests,
            "token_usage": round(used / cap, 4),
            "gen_throughput": round(eng.last_gen_throughput, 2),
            "cache_hit_rate": round(self._cache_hit_rate(), 4),
            "utilization": 0.0,
            "total_prefill_uncached_tokens": self.counters["prompt_tokens"] - self.counters["cached_tokens"],
            "total_prefill_busy_us": 0,
            "decode_moments": [0.0] * 6,
            "memory": {
                "weight_gb": round(self.plan.weights_gib, 3),
                "kv_cache_gb": round(self.plan.k_size_gib + self.plan.v_size_gib, 3),
                "graph_gb": round(self.plan.cuda_graph_gib, 3),
                "token_capacity": self.plan.max_total_num_tokens,
            },
            "disaggregation": {
                "mode": "null",
                "prefill_bootstrap_queue_reqs": 0,
                "prefill_inflight_queue_reqs": 0,
                "decode_prealloc_queue_reqs": 0,
                "decode_transfer_queue_reqs": 0,
                "decode_retracted_queue_reqs": 0,
                "kv_transfer_speed_gb_s": 0.0,
                "kv_transfer_latency_ms": 0.0,
            },
            "queues": {
                "waiting": len(eng.waiting),
                "grammar": 0,
                "paused": 0,
                "retracted": 0,
                "prealloc_ready": 0,
            },
        }
        return json_response(
            {
                "timestamp": datetime.now(timezone.utc).isoformat(),
                "version": self.settings.sglang_version,
                "accelerator": None,
                "num_accelerators": 1,
                "loads": [load],
            }
        )

    def _cache_hit_rate(self) -> float:
        prompt = self.counters["prompt_tokens"]
        return self.counters["cached_tokens"] / prompt if prompt else 0.0

    async def metrics(self, request: Request) -> Response:
        """``/metrics`` with 0.5.23's names, types and label names (a subset of what it exposes). Like
        SGLang's multiprocess Prometheus registry, a family appears once it has a sample: a labelled
        counter or histogram after its first event."""
        model = self.served_model_name
        sched = f'engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        tok = f'engine_type="unified",model_name="{model}"'
        lines: list[str] = []
        for name, value in self._gauges().items():
            _family(lines, name, "gauge", [f"sglang:{name}{{{sched}}} {float(value)}"])
        _family(
            lines,
            "num_retracted_reqs",
            "gauge",
            [f'sglang:num_retracted_reqs{{{sched},pid="{os.getpid()}"}} 0.0'],
        )
        for name, kind, samples in (*self._counters(sched, tok), *self._histograms(sched, tok)):
            _family(lines, name, kind, samples)
        return Response(200, ("\n".join(lines) + "\n").encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _gauges(self) -> dict[str, float]:
        """The scheduler's gauges, by name without the ``sglang:`` prefix."""
        eng = self.engine
        used = eng.used_tokens
        cap = max(1, self.plan.max_total_num_tokens)
        return {
            "num_running_reqs": len(eng.running),
            "num_used_tokens": used,
            "token_usage": used / cap,
            "full_token_usage": used / cap,
            "swa_token_usage": 0.0,
            "mamba_usage": (len(eng.running) / max(1, self.plan.mamba_slots or 1))
            if self.plan.mamba_slots
            else 0.0,
            "decode_sum_seq_lens": used,
            "gen_throughput": eng.last_gen_throughput,
            "num_queue_reqs": len(eng.waiting),
            "num_grammar_queue_reqs": 0,
            "cache_hit_rate": self._cache_hit_rate(),
            "max_total_num_tokens": self.plan.max_total_num_tokens,
            "spec_accept_length": eng.last_accept_length if self.spec else 0.0,
            "spec_accept_rate": eng.last_accept_rate if self.spec else 0.0,
            "spec_num_draft_tokens": self.spec.num_draft_tokens if self.spec else 0,
            "spec_num_steps": self.spec.num_steps if self.spec else 0,
            "spec_cap_length": 0.0,  # capped verify (ragged verify cap): not simulated, never set
            "spec_block_accept_length": 0.0,  # block verification (CUDA/ROCm only): not simulated
            "utilization": min(1.0, len(eng.running) / max(1, self.plan.max_running_requests)),
            "is_cuda_graph": 0.0 if self.args.disable_cuda_graph else 1.0,
            "new_token_ratio": 0.0,
            "context_len": self.context_len,
            "page_size": self.plan.page_size,
            "num_pages": self.plan.max_total_num_tokens // max(1, self.plan.page_size),
            "weight_memory_usage_gb": round(self.plan.weights_gib, 3),
            "kv_cache_memory_usage_gb": round(self.plan.k_size_gib + self.plan.v_size_gib, 3),
        }

    def _counters(self, sched: str, tok: str) -> list[tuple[str, str, list[str]]]:
        """The counter families as (name, type, samples), labelled per scheduler or tokenizer."""
        out: list[tuple[str, str, list[str]]] = []
        for name in ("prompt_tokens_total", "generation_tokens_total", "num_requests_total"):
            key = name.removesuffix("_total")
            samples = [
                f'sglang:{name}{{{tok},is_streaming="{flag}"}} {float(value)}'
                for flag, value in sorted(self.stream_counters[key].items())
            ]
            out.append((name, "counter", samples))
        eng = self.engine
        cached = self.counters["cached_tokens"]
        aborted = self.counters["num_aborted_requests"]
        realtime = eng.realtime_tokens_total
        graph_mode = "decode_none" if self.args.disable_cuda_graph else "decode_cuda_graph"
        for name, value, sample in (
            ("cached_tokens_total", cached, f'{{{tok},cache_source="device"}} {float(cached)}'),
            ("num_aborted_requests_total", aborted, f"{{{tok}}} {float(aborted)}"),
            # verify steps of the finished requests (0.5.23 counts them per request as it finishes)
            (
                "spec_verify_calls_total",
                self.counters["spec_verify_calls"],
                f"{{{tok}}} {float(self.counters['spec_verify_calls'])}",
            ),
            ("realtime_tokens_total", realtime, f'{{{sched},mode="decode"}} {float(realtime)}'),
            (
                "cuda_graph_passes_total",
                eng.decode_steps,
                f'{{{sched},mode="{graph_mode}"}} {float(eng.decode_steps)}',
            ),
        ):
            out.append((name, "counter", [f"sglang:{name}{sample}"] if value else []))
        return out

    def _histograms(self, sched: str, tok: str) -> list[tuple[str, str, list[str]]]:
        """The histogram families as (name, type, samples)."""
        out: list[tuple[str, str, list[str]]] = []
        for name, hists in (
            ("time_to_first_token_seconds", self.h_ttft),
            ("e2e_request_latency_seconds", self.h_e2e),
        ):
            samples = [
                x
                for flag, h in sorted(hists.items())
                for x in h.render(f"sglang:{name}", f'{tok},is_streaming="{flag}"')
            ]
            out.append((name, "histogram", samples))
        out.append(
            (
                "inter_token_latency_seconds",
                "histogram",
                self.h_itl.render("sglang:inter_token_latency_seconds", tok),
            )
        )
        out.append(
            ("queue_time_seconds", "histogram", self.h_queue.render("sglang:queue_time_seconds", sched))
        )
        return out
