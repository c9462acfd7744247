"""SGLang request bodies and streamed-response decoding, per API.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.loadgen_api``.

APIs:

- ``native``: ``POST /generate`` with ``stream: true``. SGLang streams cumulative ``text``/``output_ids``
  and a ``meta_info`` whose ``completion_tokens`` is the server's running count, so every chunk gives
  the exact number of tokens it carried (delta of ``completion_tokens``). The final chunk's
  ``meta_info`` carries ``prompt_tokens``, ``finish_reason`` and, under speculative decoding,
  ``spec_verify_ct`` / ``spec_accept_length`` / ``spec_accept_rate`` / token counters. Unless the server
  runs with ``--incremental-streaming-output``, the final chunk's ``output_ids`` are every output token,
  which the record keeps when asked (greedy runs, for the losslessness gate).
- ``openai``: ``POST /v1/completions``; ``openai-chat``: ``POST /v1/chat/completions``; both with
  ``stream_options: {include_usage: true, continuous_usage_stats: true}``. When a chunk carries
  ``usage.completion_tokens`` (continuous usage) it is the cumulative server count; otherwise each
  content-bearing chunk counts as one token and the record says ``chunk_token_source =
  "chunk_count_estimate"``. The final usage chunk gives the authoritative totals.

Hot path: per event, only a byte search for ``"completion_tokens"`` (from the end, where SGLang puts
``meta_info``/``usage``); a full ``json.loads`` runs once per request on the last event, and on an event
only when the fast path cannot answer (error events, no usage).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import prompts as prompts_mod
from . import sglang_facts as facts

Prompt = prompts_mod.Prompt

API_PATHS: dict[str, str] = facts.API_PATHS
APIS: tuple[str, ...] = tuple(API_PATHS)

_CT_KEY = b'"completion_tokens"'
_CT_VALUE = re.compile(rb"\s*:\s*(\d+)")
_FR_NULL = b'"finish_reason":null'  # compact JSON (SGLang's pydantic dumps)
_FR_NULL_SPACED = b'"finish_reason": null'  # json.dumps defaults


@dataclass(frozen=True)
class SamplingSpec:
    """What every request asks for. Greedy, fixed length by default so configs do identical work."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    ignore_eos: bool = False
    top_p: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # merged into sampling params / OpenAI body


@dataclass
class RequestRecord:
    """Raw facts about one request. Times are seconds on the client's monotonic clock, relative to the
    start of the load point (``t0``). Nothing here is derived; metrics.py computes from these."""

    idx: int
    prompt_id: str
    category: str
    warmup: bool = False
    scheduled_s: float = 0.0  # when the load shape wanted it sent
    ready_s: float = 0.0  # when a concurrency slot was free and the schedule due (>= scheduled_s)
    sent_s: float | None = None  # request bytes handed to the socket
    first_byte_s: float | None = None
    end_s: float | None = None
    chunk_t: list[float] = field(default_factory=list)  # arrival of each streamed event with data
    chunk_tokens: list[int] = field(default_factory=list)  # cumulative completion tokens at that event
    chunk_token_source: str = "server"  # "server" | "chunk_count_estimate"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_source: str = "server"  # "server" | "client_estimate" (labelled fallback) | "none"
    cached_tokens: int | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None  # as reported by the server
    spec_accept_rate: float | None = None
    spec_accept_token_num: int | None = None
    spec_draft_token_num: int | None = None
    # Verify steps by number of correct draft tokens (index k: k drafts accepted before the bonus token).
    spec_accept_histogram: list[int] | None = None
    # Output token ids (native API, greedy sampling, measured requests; None otherwise or when the server
    # streams increments): what the losslessness gate compares between configs.
    output_ids: list[int] | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    bytes_received: int = 0
    n_events: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_body(api: str, prompt: Prompt, sampling: SamplingSpec, model: str | None) -> bytes:
    """JSON body for one streamed request. A prompt with its own ``max_new_tokens`` (a trace's output
    length) asks for exactly that many tokens (``ignore_eos``), whatever ``sampling`` says."""
    max_new = prompt.max_new_tokens or sampling.max_new_tokens
    ignore_eos = sampling.ignore_eos or prompt.max_new_tokens is not None
    ids = prompt.token_ids()
    if api == "native":
        sp: dict[str, Any] = {"max_new_tokens": max_new, "temperature": sampling.temperature}
        if ignore_eos:
            sp["ignore_eos"] = True
        if sampling.top_p is not None:
            sp["top_p"] = sampling.top_p
        sp.update(sampling.extra)
        body: dict[str, Any] = {"sampling_params": sp, "stream": True}
        if ids is not None:
            body["input_ids"] = list(ids)
        else:
            body["text"] = prompt.as_text()
        return json.dumps(body, separators=(",", ":")).encode()
    if api not in ("openai", "openai-chat"):
        raise ValueError(f"unknown api {api!r}; choose one of {', '.join(APIS)}")
    body = {
        "model": model or "default",
        "max_tokens": max_new,
        "temperature": sampling.temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True  # SGLang extension on its OpenAI routes
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    if api == "openai":
        body["prompt"] = list(ids) if ids is not None else prompt.as_text()
    else:
        body["messages"] = prompt.as_messages()
    body.update(sampling.extra)
    return json.dumps(body, separators=(",", ":")).encode()


def fast_completion_tokens(payload: bytes) -> int | None:
    """The last ``"completion_tokens": N`` in a JSON event, without decoding it (None if absent/null).

    Safe on JSON: inside a string value the key's quotes would be escaped, so a match is always a key.
    """
    i = payload.rfind(_CT_KEY)
    if i < 0:
        return None
    m = _CT_VALUE.match(payload, i + len(_CT_KEY))
    return int(m.group(1)) if m else None


def _is_error_event(payload: bytes) -> bool:
    head = payload[:24]
    return b'"error"' in head or b'"object":"error"' in head


def _error_message(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    return str(obj)[:500]


def _finish_reason_str(fr: Any) -> str | None:
    if fr is None:
        return None
    if isinstance(fr, dict):
        kind = fr.get("type")
        if kind == "abort":
            return f"abort: {fr.get('message', '')}"[:200]
        return str(kind)
    return str(fr)


class StreamDecoder:
    """Turns a response's SSE events into a :class:`RequestRecord` (one instance per request)."""

    __slots__ = ("_chunk_t", "_chunk_tok", "_last", "_last_usage", "api", "done", "keep_output_ids", "rec")

    def __init__(self, api: str, rec: RequestRecord, *, keep_output_ids: bool = False) -> None:
        self.api = api
        self.rec = rec
        self.keep_output_ids = keep_output_ids
        self._chunk_t = rec.chunk_t
        self._chunk_tok = rec.chunk_tokens
        self._last: bytes | None = None  # native: last data event
        self._last_usage: dict[str, Any] | None = None
        self.done = False

    # The callback given to HttpClient.request(on_event=...): bound once per request to the API's handler.
    @property
    def on_event(self) -> Callable[[list[bytes], float], None]:
        return self._on_native if self.api == "native" else self._on_openai

    def _on_native(self, payloads: list[bytes], t: float) -> None:
        chunk_t = self._chunk_t
        chunk_tok = self._chunk_tok
        key = _CT_KEY
        skip = len(_CT_KEY)
        match = _CT_VALUE.match
        for payload in payloads:
            i = payload.rfind(key)
            m = match(payload, i + skip) if i >= 0 else None
            if m is None:  # [DONE], error events, anything unexpected: the slow, decoding path
                if payload == b"[DONE]":
                    self.done = True
                else:
                    self._slow_native(payload, t)
                continue
            chunk_t.append(t)
            chunk_tok.append(int(m.group(1)))
            self._last = payload

    def _slow_native(self, payload: bytes, t: float) -> None:
        try:
            obj = json.loads(payload)
        except ValueError:
            self.rec.error = f"undecodable stream event: {payload[:120]!r}"
            return
        if isinstance(obj, dict) and "error" in obj:
            self.rec.error = f"server error event: {_error_message(obj)}"
            return
        meta = obj.get("meta_info", {}) if isinstance(obj, dict) else {}
        n = meta.get("completion_tokens")
        if isinstance(n, int):
            self._chunk_t.append(t)
            self._chunk_tok.append(n)
        self._last = payload

    def _on_openai(self, payloads: list[bytes], t: float) -> None:
        chunk_t = self._chunk_t
        chunk_tok = self._chunk_tok
        key = _CT_KEY
        skip = len(_CT_KEY)
        match = _CT_VALUE.match
        for payload in payloads:
            i = payload.rfind(key)
            m = match(payload, i + skip) if i >= 0 else None
            # Fast path: a mid-stream chunk with continuous usage (cumulative server count, not finished).
            if m is not None and (_FR_NULL in payload or _FR_NULL_SPACED in payload):
                chunk_t.append(t)
                chunk_tok.append(int(m.group(1)))
            elif payload == b"[DONE]":
                self.done = True
            else:
                self._openai_event(payload, t)

    def _openai_event(self, payload: bytes, t: float) -> None:
        rec = self.rec
        n = fast_completion_tokens(payload)
        needs_decode = (
            n is None
            or _is_error_event(payload)
            or (b'"finish_reason":null' not in payload and b'"finish_reason": null' not in payload)
        )
        obj: Any = None
        if needs_decode:
            try:
                obj = json.loads(payload)
            except ValueError:
                rec.error = f"undecodable stream event: {payload[:120]!r}"
                return
            if not isinstance(obj, dict) or "error" in obj or obj.get("object") == "error":
                rec.error = f"server error event: {_error_message(obj)}"
                return
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._last_usage = usage
            for ch in obj.get("choices") or ():
                fr = ch.get("finish_reason")
                if fr is not None:
                    rec.finish_reason = _finish_reason_str(fr)
        choices_empty = obj is not None and not obj.get("choices")
        if n is not None and (obj is None or not choices_empty):
            self._chunk_t.append(t)
            self._chunk_tok.append(n)
            return
        if choices_empty:  # the trailing usage-only chunk carries no tokens of its own
            return
        # No usage on this chunk: count content-bearing chunks (labelled estimate).
        has_content = False
        for ch in obj.get("choices") or ():
            delta = ch.get("delta")
            text = (
                ch.get("text") if delta is None else (delta.get("content") or delta.get("reasoning_content"))
            )
            if text:
                has_content = True
        if has_content:
            rec.chunk_token_source = "chunk_count_estimate"
            prev = self._chunk_tok[-1] if self._chunk_tok else 0
            self._chunk_t.append(t)
            self._chunk_tok.append(prev + 1)

    def finish(self) -> None:
        """Fill totals and speculative fields from the final event / usage."""
        rec = self.rec
        if self.api == "native":
            self._finish_native()
        else:
            usage = self._last_usage
            if usage is not None and isinstance(usage.get("completion_tokens"), int):
                rec.completion_tokens = usage["completion_tokens"]
                rec.prompt_tokens = usage.get("prompt_tokens")
                details = usage.get("prompt_tokens_details") or {}
                if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                    rec.cached_tokens = details["cached_tokens"]
                rec.token_source = "server"
            elif self._chunk_tok:
                rec.completion_tokens = self._chunk_tok[-1]
                rec.token_source = "client_estimate"
            else:
                rec.token_source = "none"
        if rec.error is None and not self._chunk_tok and rec.http_status == 200:
            rec.error = "stream ended without any token-bearing event"

    def _finish_native(self) -> None:
        rec = self.rec
        if self._last is None:
            rec.token_source = "none"
            return
        try:
            obj = json.loads(self._last)
        except ValueError:
            rec.error = rec.error or "undecodable final stream event"
            return
        meta = obj.get("meta_info") or {}
        ct = meta.get("completion_tokens")
        if isinstance(ct, int):
            rec.completion_tokens = ct
            rec.token_source = "server"
        pt = meta.get("prompt_tokens")
        rec.prompt_tokens = pt if isinstance(pt, int) else None
        cached = meta.get("cached_tokens")
        rec.cached_tokens = cached if isinstance(cached, int) else None
        rec.finish_reason = _finish_reason_str(meta.get("finish_reason"))
        if rec.finish_reason and rec.finish_reason.startswith("abort"):
            rec.error = rec.error or f"server aborted the request ({rec.finish_reason})"
        v = meta.get("spec_verify_ct")
        if isinstance(v, int):
            rec.spec_verify_ct = v
        for field_name, keys in facts.SPEC_META_KEYS:  # each release's spelling, newest first
            v = next((meta[k] for k in keys if meta.get(k) is not None), None)
            if field_name == "spec_accept_histogram":
                if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                    rec.spec_accept_histogram = v
            elif isinstance(v, int) and not isinstance(v, bool):
                setattr(rec, field_name, v)
        for key in ("spec_accept_length", "spec_accept_rate"):
            v = meta.get(key)
            if isinstance(v, (int, float)):
                setattr(rec, key, float(v))
        if self.keep_output_ids:
            rec.output_ids = complete_output_ids(obj.get("output_ids"), rec.completion_tokens)


def complete_output_ids(ids: Any, completion_tokens: int | None) -> list[int] | None:
    """The final event's ``output_ids`` when they are the whole output (as many as ``completion_tokens``,
    all ints); None for increments (``--incremental-streaming-output``) or anything else."""
    if not isinstance(ids, list) or completion_tokens is None or len(ids) != completion_tokens:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
        return None
    return ids


def decode_json_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def error_from_response(status: int, body: bytes) -> str:
    """Short, readable error for a non-200 answer (never echoes request headers)."""
    obj = decode_json_body(body)
    detail = _error_message(obj) if obj is not None else body[:300].decode("utf-8", "replace").strip()
    hint = ""
    if status in (401, 403):
        hint = " (the server wants an API key: pass --api-key-file, or check the key)"
    elif status == 404:
        hint = " (wrong route for this server: try another --api)"
    return f"HTTP {status}{hint}: {detail}"
