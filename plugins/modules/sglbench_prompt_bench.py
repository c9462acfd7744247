#!/usr/bin/python
"""Ansible module: run the sglbench prompt benchmark on the GPU host against the local SGLang server."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_prompt_bench
short_description: Drive a local SGLang server with streamed prompts and return per-point metrics
description:
  - Runs next to the server (no network noise) with the stdlib asyncio load generator shipped as module_utils
    (C(sglbench_loadgen) and siblings), with keep-alive HTTP/1.1, native C(/generate) by default (server token
    counts and speculative acceptance per request) or the OpenAI routes.
  - Per load point and repeat it flushes the cache, runs warmup requests (excluded), flushes again, runs the
    measured load and reads the server's acceptance counter.
  - Returns the summary (same document as C(sglbench bench)'s summary.json) and writes the raw per-request
    records as JSON lines to I(records_path) on the host, for C(ansible.builtin.fetch).
  - Each point carries C(valid) and C(invalid_reasons) from the client's self-check (send lateness, event-loop
    lag, client CPU, CPU starvation, achieved rate) and from the error-rate rule (I(max_error_rate)).
  - Not idempotent by nature; reports C(changed=false). Skipped in check mode.
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:30000
  api:
    description:
      - C(native) = C(/generate); C(openai) = C(/v1/completions); C(openai-chat) = C(/v1/chat/completions).
    type: str
    choices: [native, openai, openai-chat]
    default: native
  model:
    description: Model name for the OpenAI routes (default the first id of C(/v1/models)).
    type: str
  prompts:
    description:
      - Prompt records (C(prompt)/C(messages)/C(input_ids)/C(token_blocks), optional C(id), C(category),
        C(max_new_tokens), C(arrival_s)) or plain strings, e.g. the lines of a shipped set read on the
        controller with C(lookup('file', ...)).
      - Records with C(arrival_s) are a trace (C(module_utils/sglbench_hostlib/trace_replay)), replayed
        alone; a rate point sends them at their own instants, scaled to its rate.
      - Records with C(session) and C(turn) are the user turns of multi-turn sessions, each sent with the
        session's history and the server's answers (C(module_utils/sglbench_hostlib/sessions)); then every
        record must be one, and I(procs) must be 1. Each point's summary gains C(turns), per-turn TTFT and
        cached tokens.
      - Mutually exclusive with I(synthetic_input_len).
    type: list
    elements: raw
  synthetic_input_len:
    description: Use 64 synthetic prompts of exactly this many random token ids instead of I(prompts).
    type: int
  concurrency:
    description: Closed-loop concurrency levels; with I(request_rate) the single in-flight cap.
    type: list
    elements: int
  max_concurrency:
    description: Cap of the default 1, 2, 4, ... ladder when I(concurrency) is not given (default the server's
      effective max running requests).
    type: int
  request_rate:
    description: Poisson request rates in req/s (open loop), one point each.
    type: list
    elements: float
  num_prompts:
    description: Requests per point and repeat (no cap when I(duration) is set and this is omitted).
    type: int
  duration:
    description: Stop sending new requests after this many seconds per point.
    type: float
  max_new_tokens:
    description: Output tokens per request.
    type: int
    default: 256
  ignore_eos:
    description: Always generate I(max_new_tokens) tokens.
    type: bool
    default: false
  temperature:
    description: Sampling temperature (0 = greedy).
    type: float
    default: 0.0
  repeats:
    description: Repeats per point; repeat r uses seed I(seed)+r.
    type: int
    default: 3
  first_repeat:
    description:
      - Index of the first repeat, for callers that run one repeat per call. Repeat r always uses seed
        I(seed)+r and is labelled r.
    type: int
    default: 0
  warmup:
    description: Warmup requests per point (default one per concurrency slot, at most 64).
    type: int
  seed:
    description: Base seed for prompt order and Poisson schedules.
    type: int
    default: 0
  flush_cache:
    description: POST C(/flush_cache) between points.
    type: bool
    default: true
  api_key:
    description: Bearer key when the server runs with C(--api-key).
    type: str
  request_timeout:
    description: Per-request timeout in seconds.
    type: float
    default: 600
  slo_ttft_ms:
    description: Goodput SLO on TTFT (ms).
    type: float
  slo_tpot_ms:
    description: Goodput SLO on TPOT (ms).
    type: float
  slo_e2e_ms:
    description: Goodput SLO on end-to-end latency (ms).
    type: float
  simulated:
    description: Force the simulated label (default ask the server; the stand-in says so itself).
    type: bool
  procs:
    description:
      - Client processes per point (1 to 64). One process is one event loop on one core (about 100k streamed
        chunks/s); use more when points are flagged for client CPU.
      - With more than one, each point forks this many processes after the cache flush. Each opens its own
        connections, runs its share of the warmup, and all start at one common instant.
      - In a closed loop the concurrency is split over them and every level must be at least I(procs);
        process k sends requests k, k+procs, ... of the same prompt sequence. In rate mode the one Poisson
        schedule is dealt out the same way and a concurrency cap is split.
      - The CPU self-check applies to each process (C(client.per_process) in every point of the summary).
    type: int
    default: 1
  max_error_rate:
    description:
      - Largest fraction of failed measured requests a valid point may have. The default 0 is strict, any
        failed request (a server that died or restarted mid-point, a timeout, an HTTP error) makes the point
        invalid, with the count and an example error in C(invalid_reasons).
    type: float
    default: 0.0
  guard:
    description:
      - Host-side guard (C(module_utils/sglbench_hostlib/host_guard)). With it the module holds
        C(/run/sglbench/bench.lock) while it sends load and refuses to run when another benchmark holds it,
        or when I(guard.unit)'s current systemd InvocationID is not I(guard.invocation_id) (another campaign
        restarted the server).
      - When the lock is held by a client of the same campaign (I(guard.run_id), I(guard.controller)) against
        the same I(guard.unit), that client lost its connection to the controller and Ansible is running the
        point again (ssh retries); it is ended (SIGTERM, SIGKILL after 5 s) and the point is measured afresh.
        Each point of the summary then carries C(ended_client) (pid, started_at, killed, reason) and the
        module warns.
      - Keys C(unit), C(invocation_id), C(run_id), C(controller), C(dir) (default C(/run/sglbench)).
    type: dict
  points:
    description:
      - The points to measure, in order, each a dict with C(key) (its name, e.g. C(c4-r1)), C(concurrency),
        C(request_rate) and C(repeat). Replaces I(concurrency), I(request_rate), I(repeats) and
        I(first_repeat); the result then holds one entry per point in C(points).
      - Every point is measured alone (its own warmup, cache flushes and seed I(seed)+repeat), as one call per
        point would measure it; one call for a whole ladder saves a host round trip per point.
      - A point that fails ends the call; the points measured before it are returned, the failure in
        C(failed_point).
    type: list
    elements: dict
  spool:
    description:
      - With I(points), keep each measured point on the host (C(module_utils/sglbench_hostlib/point_spool)) in
        C(spool.dir) under C(spool.hash) (the attempt's identity hash) before the next one starts, and
        return a point found there (same key and hash) instead of measuring it again, so a controller that
        died or lost its connection mid-call loses nothing. Spooled points not in I(points) are removed
        first (the controller committed them), and so is never one whose measurement the controller has
        had (C(spool.seen), point key to the C(t0_unix) of every version it committed).
      - Keys C(dir), C(hash), C(seen).
    type: dict
  records_path:
    description: Host path for the per-request records (JSON lines, written atomically). Omit to skip them.
    type: path
  return_records:
    description:
      - Also return the per-request records in the result (C(records)), which saves a C(fetch) round trip
        when the caller stores them on the controller (the cycle does, with I(points)).
    type: bool
    default: false
  pack_records:
    description:
      - With I(points), return each point's records as C(records_packed) (its JSON lines, gzip-compressed,
        base64) instead of C(records). A point's rows run to hundreds of kilobytes; packed they cross the
        connection a fraction of the size and Ansible decodes one string instead of every value. The
        controller reads them with C(sglbench.hostlib.request_rows.unpack).
    type: bool
    default: false
  telemetry:
    description:
      - GPU and server sampling during each point (C(module_utils/sglbench_hostlib/telemetry)). Sampling
        starts before the point's first cache flush and warm-up and stops right after its last measured
        response; each point gets one raw document in the result's C(telemetry). A sampling problem never
        fails the module, it is listed in the document's C(errors).
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Sample during each point.
        type: bool
        default: false
      gpus:
        description: The point's GPU indices (the config's GPUs); empty = no GPU sampling.
        type: list
        elements: int
        default: []
      gpu_interval_ms:
        description: C(nvidia-smi -lms) interval.
        type: int
        default: 200
      server_interval_ms:
        description: Interval of the C(/metrics) and load endpoint reads.
        type: int
        default: 1000
      metrics:
        description: Read C(<url>/metrics) (the server runs with C(--enable-metrics)).
        type: bool
        default: false
      load_endpoint:
        description:
          - The release's load endpoint, C(/v1/loads) or C(/get_load) (C(sglang_facts.load_endpoint)).
          - Omit to skip it.
        type: str
      nvidia_smi:
        description: The C(nvidia-smi) binary.
        type: str
        default: nvidia-smi
extends_documentation_fragment:
  - sglbench
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: bench | Run the prompt benchmark against the local server
  sglbench_prompt_bench:
    url: "http://127.0.0.1:{{ port }}"
    prompts: "{{ lookup('ansible.builtin.file', 'python/sglbench/prompts/math.jsonl').splitlines()
                 | reject('match', '^#') | map('from_json') | list }}"
    concurrency: [1, 4, 16]
    max_new_tokens: 256
    ignore_eos: true
    records_path: /tmp/sglbench/requests.jsonl
  register: bench
"""

RETURN = r"""
summary:
  description: The summary.json document (schema sglbench.bench/1).
  type: dict
  returned: success
  sample:
    schema: sglbench.bench/1
    simulated: true
    points:
      - {point: c4, concurrency: 4, repeat: 0, n_ok: 200, n_err: 0, output_throughput_tok_s: 812.5,
         ttft_ms: {p50: 41.2, p90: 60.3, p99: 88.0, mean: 44.9}, accept_length_mean: 3.1, valid: true,
         client: {procs: 2, cpu_fraction: 0.41, per_process: [{proc: 0, cpu_s: 1.9, wall_s: 4.6},
                                                             {proc: 1, cpu_s: 1.8, wall_s: 4.6}]}}
records_path:
  description: Where the per-request records were written (null when not requested).
  type: str
  returned: success
n_records:
  description: Number of per-request records (measured requests of every point and repeat).
  type: int
  returned: success
records:
  description: The per-request records (same rows as the I(records_path) file).
  type: list
  elements: dict
  returned: when I(return_records) is true
points:
  description:
    - With I(points), one entry per point measured (or found in the spool), in order; C(key), C(summary) (the
      point's entry of the summary document), C(records) (its per-request rows; with I(pack_records)
      C(records_packed) and their count C(n_records) instead) and C(spooled) (true when it was measured by
      an earlier call that did not return).
  type: list
  elements: dict
  returned: when I(points) is given
meta:
  description: With I(points), the run meta of the summary document (server facts, client), once for all.
  type: dict
  returned: when I(points) is given
failed_point:
  description:
    - With I(points), the point that failed (C(key), C(msg)); the points after it were not measured. C(key) is
      null when the points were measured but the last could not be kept in the spool.
  type: dict
  returned: when a point of I(points) failed
telemetry:
  description:
    - One raw telemetry document per point, in the order of C(summary.points) (schema 1, docs/records.md).
      Times are the host's epoch seconds. C(clock) is when this call began and ended on the host (the
      controller estimates the clock offset from them), C(window) the point's measured window (first measured
      request sent to last measured response received), C(sampling) what was sampled and when, C(gpu) and
      C(server) the samples as columns and rows, C(errors) what could not be sampled.
  type: list
  elements: dict
  returned: when I(telemetry.enabled) is true
  sample:
    - schema: 1
      clock: {host_started: 1733350000.10, host_ended: 1733350012.40}
      window: {start: 1733350001.00, end: 1733350011.00}
      sampling: {gpus: [0], gpu_interval_ms: 200, server_interval_ms: 1000, started: 1733350000.20,
                 stopped: 1733350011.30, metrics: true, load_endpoint: /v1/loads}
      gpu: {columns: [t, gpu, power_w, sm_util_pct, mem_util_pct, mem_used_mib, sm_clock_mhz, temp_c,
                      throttle_mask],
            rows: [[1733350000.21, 0, 312.5, 87.0, 40.0, 81234.0, 2520.0, 61.0, 0]], t_source: nvidia-smi}
      server: {columns: [t, source, name, value], rows: [[1733350001.0, metrics, num_running_reqs, 4.0]]}
      errors: []
"""

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib import point_spool, request_rows
from ansible.module_utils.sglbench_hostlib.atomic_file import write_atomic
from ansible.module_utils.sglbench_hostlib.host_guard import (
    Campaign,
    GuardRefused,
    Lease,
    bench_guard,
    check_invocation,
)
from ansible.module_utils.sglbench_hostlib.loadgen import (
    DEFAULT_MAX_CONCURRENCY,
    BenchSpec,
    CampaignResult,
    LoadgenError,
    LoadPoint,
    SamplingSpec,
    campaign_summary,
    concurrency_ladder,
    effective_max_running_requests,
    fetch_server_info,
    record_rows,
    run_campaign,
)
from ansible.module_utils.sglbench_hostlib.metrics import Slo
from ansible.module_utils.sglbench_hostlib.prompts import PromptError, prompts_from_params, synthetic_prompts
from ansible.module_utils.sglbench_hostlib.result_schema import LOAD_S, note_ended_client
from ansible.module_utils.sglbench_hostlib.systemd_unit import read_unit_state
from ansible.module_utils.sglbench_hostlib.telemetry import (
    PointSampling,
    TelemetryConfig,
    TelemetryConfigError,
    measured_window,
    point_telemetry,
)

TELEMETRY_SPEC = {
    "enabled": {"type": "bool", "default": False},
    "gpus": {"type": "list", "elements": "int", "default": []},
    "gpu_interval_ms": {"type": "int", "default": 200},
    "server_interval_ms": {"type": "int", "default": 1000},
    "metrics": {"type": "bool", "default": False},
    "load_endpoint": {"type": "str"},
    "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
}


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": "http://127.0.0.1:30000"},
            "api": {"type": "str", "choices": ["native", "openai", "openai-chat"], "default": "native"},
            "model": {"type": "str"},
            "prompts": {"type": "list", "elements": "raw"},
            "synthetic_input_len": {"type": "int"},
            "concurrency": {"type": "list", "elements": "int"},
            "max_concurrency": {"type": "int"},
            "request_rate": {"type": "list", "elements": "float"},
            "num_prompts": {"type": "int"},
            "duration": {"type": "float"},
            "max_new_tokens": {"type": "int", "default": 256},
            "ignore_eos": {"type": "bool", "default": False},
            "temperature": {"type": "float", "default": 0.0},
            "repeats": {"type": "int", "default": 3},
            "first_repeat": {"type": "int", "default": 0},
            "warmup": {"type": "int"},
            "seed": {"type": "int", "default": 0},
            "flush_cache": {"type": "bool", "default": True},
            "api_key": {"type": "str", "no_log": True},
            "request_timeout": {"type": "float", "default": 600.0},
            "slo_ttft_ms": {"type": "float"},
            "slo_tpot_ms": {"type": "float"},
            "slo_e2e_ms": {"type": "float"},
            "simulated": {"type": "bool"},
            "procs": {"type": "int", "default": 1},
            "max_error_rate": {"type": "float", "default": 0.0},
            "guard": {"type": "dict"},
            "points": {"type": "list", "elements": "dict"},
            "spool": {"type": "dict"},
            "records_path": {"type": "path"},
            "return_records": {"type": "bool", "default": False},
            "pack_records": {"type": "bool", "default": False},
            "telemetry": {"type": "dict", "default": {}, "options": TELEMETRY_SPEC},
        },
        mutually_exclusive=[("prompts", "synthetic_input_len")],
        required_one_of=[("prompts", "synthetic_input_len")],
        supports_check_mode=True,
    )


def load_points(p: dict, module: AnsibleModule) -> list:
    """Rates x one cap, a concurrency list, or the default ladder capped by the server's request slots."""
    conc, rates = p["concurrency"], p["request_rate"]
    if rates:
        if conc and len(conc) > 1:
            module.fail_json(
                msg="with request_rate, concurrency is the single in-flight cap: give one value",
                concurrency=conc,
            )
        return [LoadPoint(concurrency=conc[0] if conc else None, request_rate=r) for r in rates]
    if conc:
        return [LoadPoint(concurrency=c) for c in conc]
    cap = p["max_concurrency"]
    if cap is None:
        cap = effective_max_running_requests(fetch_server_info(p["url"], p["api_key"]))
    return [LoadPoint(concurrency=c) for c in concurrency_ladder(cap or DEFAULT_MAX_CONCURRENCY)]


def write_records(path: str, rows: list) -> None:
    """One JSON line per request, atomically (owner-only, 0600, as the records have always been)."""
    write_atomic(path, request_rows.jsonl(rows), mode=0o600)


# What ends a benchmark call as a module failure with its message, not a traceback.
LOAD_ERRORS = (GuardRefused, LoadgenError, PromptError, ValueError)


def fail_load(module: AnsibleModule, p: dict, err: Exception) -> None:
    """The call's failure: refused by the host guard, or the load itself failed."""
    if isinstance(err, GuardRefused):
        module.fail_json(msg=f"prompt benchmark against {p['url']} refused: {err}", url=p["url"], guard=True)
    else:
        module.fail_json(msg=f"prompt benchmark against {p['url']} failed: {err}", url=p["url"], api=p["api"])


@contextlib.contextmanager
def sampled_load(module: AnsibleModule, p: dict, hooks: PointSampling | None):
    """The load under the host guard (a cut-off client of this campaign ended first, and said so), with
    the telemetry sampler closed whatever happens; yields the guard's lease."""
    with guarded(p) as lease:
        warn_takeover(module, p["url"], lease)
        try:
            yield lease
        finally:
            if hooks is not None:
                hooks.close()


@contextlib.contextmanager
def guarded(p: dict):
    """The host-side guard around the load (a no-op without ``guard``)."""
    g = p.get("guard") or {}
    if not g:
        yield None
        return
    unit = str(g.get("unit") or "")
    with bench_guard(
        unit,
        p["url"],
        Campaign(str(g.get("run_id") or ""), str(g.get("controller") or "")),
        str(g.get("dir") or "/run/sglbench"),
    ) as lease:
        if unit and g.get("invocation_id"):
            try:
                current = read_unit_state(unit).invocation_id
            except RuntimeError as err:
                raise GuardRefused(f"cannot read the state of {unit}: {err}") from None
            check_invocation(unit, str(g["invocation_id"]), current)
        yield lease


def summary_of(result: CampaignResult, lease: Lease | None) -> dict:
    """The summary document, each point noting the cut-off client the guard ended before it (if any)."""
    summary = campaign_summary(result)
    if lease is not None and lease.takeover is not None:
        summary = note_ended_client(summary, lease.takeover.as_dict())
    return summary


def todo_points(p: dict) -> list[tuple[str, LoadPoint, int]]:
    """I(points) as (key, load point, repeat); ValueError names the entry that is not one."""
    todo = []
    for i, entry in enumerate(p["points"] or []):
        try:
            key = point_spool.check_key(str(entry["key"]))
            rate = entry.get("request_rate")
            conc = entry.get("concurrency")
            point = LoadPoint(
                concurrency=int(conc) if conc not in (None, "", 0) else None,
                request_rate=float(rate) if rate not in (None, "") else None,
            )
            repeat = int(entry.get("repeat") or 0)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"points[{i}] ({entry!r}) is not a point (key, concurrency, request_rate, repeat): {err}"
            ) from None
        if point.concurrency is None and point.request_rate is None:
            raise ValueError(f"points[{i}] ({key}) has neither concurrency nor request_rate")
        todo.append((key, point, repeat))
    return todo


def point_specs(spec: BenchSpec, todo: list[tuple[str, LoadPoint, int]]) -> list[tuple[str, BenchSpec]]:
    """One spec per point of ``todo``: that point alone, its repeat, at most one client process per request
    slot of a closed-loop point (the ladder starts at c1); each validated before anything is sent."""
    out = []
    for key, point, repeat in todo:
        procs = min(spec.procs, point.concurrency) if point.concurrency else spec.procs
        one = dataclasses.replace(spec, points=[point], repeats=1, first_repeat=repeat, procs=procs)
        one.validate()
        out.append((key, one))
    return out


# How long a point whose requests failed waits for the server's unit to show that it ended (a crashing
# server fails its requests a moment before systemd sees its main process exit).
SETTLE_S = 2.0


def server_ended(unit: str, invocation_id: str, wait_s: float = 0.0, step_s: float = 0.2) -> str | None:
    """Why the server of this start can no longer answer (its unit ended or was started again), or None
    while it runs; with ``wait_s``, polls that long for an end before saying None."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = read_unit_state(unit)
        except RuntimeError:
            return None  # cannot tell: the requests' own errors say what happened
        if state.ended or (invocation_id and state.invocation_id != invocation_id):
            return state.describe()
        if time.monotonic() >= deadline:
            return None
        time.sleep(step_s)


def _t0(point: dict) -> float | None:
    t0 = (point.get("summary") or {}).get("t0_unix")
    return float(t0) if isinstance(t0, (int, float)) else None


def _failed_requests(summary: dict) -> str:
    reasons = [r for r in summary.get("invalid_reasons") or [] if "requests failed" in str(r)]
    return str(reasons[0]) if reasons else f"{summary.get('n_err')} requests failed"


def measure_points(
    specs: list[tuple[str, BenchSpec]],
    spool: dict,
    lease: Lease | None,
    ended: Callable[[float], str | None] = lambda wait_s: None,
    hooks: PointSampling | None = None,
    host_started: float = 0.0,
) -> tuple[list[dict], dict | None, dict | None]:
    """Each point alone, in order: from the spool when an earlier call measured it, else measured and
    spooled before the next starts. Returns (points, meta, failed): a failure ends the loop.

    ``ended(wait_s)`` says why the server can no longer answer (None while it runs). It is asked before each
    point, and after a point whose requests failed: a point none of whose requests succeeded because the
    server died is a failed point, not a measurement; one that measured some before the server died is kept
    (invalid, its failed requests counted) and the call ends there.

    With ``hooks`` (the ``telemetry`` option), each measured point also carries its raw telemetry document.
    A point's sampler takes its last sample after the window and stops while the next point runs, so its
    document joins the point (and its spooled copy) once the next point has run, or at the end of the
    call; what sampling cost the point is not part of its ``load_s``."""
    sdir, shash = str(spool.get("dir") or ""), str(spool.get("hash") or "")
    seen = {str(k): {float(t) for t in v or []} for k, v in dict(spool.get("seen") or {}).items()}
    if sdir:
        point_spool.prune(sdir, {key for key, _s in specs}, shash)
    tel = _TelemetryJoin(hooks, host_started, sdir, shash)
    out: list[dict] = []
    meta = None
    for key, one in specs:
        found = point_spool.read_spooled(sdir, key, shash) if sdir else None
        if found is not None and _t0(found) in seen.get(key, ()):
            found = None  # the controller has had this measurement (committed, maybe rejected): measure again
        if found is not None:
            out.append({**found, "spooled": True})
            meta = meta or found.get("meta")
            continue
        gone = ended(0.0)
        if gone:
            return tel.done(out), meta, {"key": key, "msg": f"the server is gone before point {key}: {gone}"}
        sampled = hooks.sampled if hooks is not None else 0
        started = time.monotonic()
        try:
            result = run_campaign(one, hooks=hooks)
        except LoadgenError as err:
            if hooks is not None:
                hooks.close()
            failed = {"key": key, "msg": f"prompt benchmark against {one.url} failed: {err}"}
            return tel.done(out), meta, failed
        summary = summary_of(result, lease)
        # The load generator's whole run for the point (cache flushes, warm-up, measured window, counters):
        # the load the campaign chose to send, told apart from its own overhead (python/sglbench/overhead.py).
        point = {**summary["points"][0], LOAD_S: round(time.monotonic() - started, 4)}
        gone = ended(SETTLE_S) if point.get("n_err") else None
        if gone and not point.get("n_ok"):
            msg = f"the server exited during point {key} ({_failed_requests(point)}): {gone}"
            return tel.done(out), meta, {"key": key, "msg": msg}
        entry = {"key": key, "summary": point, "meta": summary.get("meta"), "records": record_rows(result)}
        meta = meta or entry["meta"]
        out.append({**entry, "spooled": False})
        if sdir:
            try:
                point_spool.write_spooled(sdir, key, shash, entry)
            except (OSError, ValueError) as err:  # returned all the same; nothing more is measured unkept
                failed = {"key": None, "msg": f"cannot keep point {key} in the spool {sdir}: {err}"}
                return tel.done(out), meta, failed
        if hooks is not None and hooks.sampled > sampled:  # this point handed over a sampler
            tel.add(len(out) - 1, sampled, result.points[0], out)
        if gone:
            return tel.done(out), meta, {"key": None, "msg": f"the server exited during point {key}: {gone}"}
    return tel.done(out), meta, None


class _TelemetryJoin:
    """Joins each measured point with its raw telemetry document once its sampler has stopped: the
    previous point's when the next one is measured, the rest when the call ends (:meth:`done`); the
    spooled copy of the point is written again with it."""

    def __init__(self, hooks: PointSampling | None, host_started: float, sdir: str, shash: str) -> None:
        self.hooks, self.host_started, self.sdir, self.shash = hooks, host_started, sdir, shash
        self.waiting: list[tuple[int, int, Any]] = []  # (index in out, index of its sampler, its result)

    def add(self, index: int, sampler: int, result: Any, out: list[dict]) -> None:
        self._join(out, upto=len(self.waiting))  # every earlier point's sampler has stopped by now
        self.waiting.append((index, sampler, result))

    def done(self, out: list[dict]) -> list[dict]:
        self._join(out, upto=len(self.waiting))
        return out

    def _join(self, out: list[dict], upto: int) -> None:
        if self.hooks is None or not self.waiting:
            return
        ready, self.waiting = self.waiting[:upto], self.waiting[upto:]
        parts = self.hooks.collect(max(s for _i, s, _r in ready) + 1)
        for index, sampler, pr in ready:
            doc = point_telemetry(
                parts[sampler], measured_window(pr.t0_wall, pr.records), self.host_started, time.time()
            )
            entry = out[index]
            cost = float((doc.get("sampling") or {}).get("overhead_s") or 0.0)
            entry["summary"][LOAD_S] = round(max(float(entry["summary"][LOAD_S]) - cost, 0.0), 4)
            entry["telemetry"] = doc
            if self.sdir:
                kept = {k: v for k, v in entry.items() if k != "spooled"}
                with contextlib.suppress(OSError, ValueError):  # the point itself is spooled already
                    point_spool.write_spooled(self.sdir, entry["key"], self.shash, kept)


def sampling_hooks(p: dict) -> PointSampling | None:
    """The per-point sampler hooks of the ``telemetry`` option (None when it is off)."""
    cfg = TelemetryConfig.from_params(p["telemetry"])
    return PointSampling(cfg, p["url"], p["api_key"]) if cfg.enabled else None


def telemetry_of(result: CampaignResult, hooks: PointSampling, host_started: float) -> list:
    """One telemetry document per measured point, in the summary's order; ``host_ended`` is now, once
    every sampler has handed its samples over."""
    points = hooks.points
    host_ended = time.time()
    return [
        point_telemetry(parts, measured_window(pr.t0_wall, pr.records), host_started, host_ended)
        for pr, parts in zip(result.points, points, strict=False)  # one each, in order
    ]


def run(module: AnsibleModule, host_started: float) -> None:
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: the benchmark was not run")
        return
    try:
        hooks = sampling_hooks(p)
    except TelemetryConfigError as err:
        module.fail_json(msg=str(err), telemetry=p["telemetry"])
        return
    if p["points"]:
        run_points(module, hooks, host_started)
        return
    try:
        prompt_list = prompt_list_of(p)
        spec = bench_spec(p, prompt_list, load_points(p, module))
        spec.validate()
        with sampled_load(module, p, hooks) as lease:
            result = run_campaign(spec, hooks=hooks)
    except LOAD_ERRORS as err:
        fail_load(module, p, err)
        return
    rows = record_rows(result)
    if p["records_path"]:
        try:
            write_records(p["records_path"], rows)
        except OSError as err:
            module.fail_json(
                msg=f"cannot write the request records to {p['records_path']}: {err}",
                records_path=p["records_path"],
            )
            return
    extra = {"records": rows} if p["return_records"] else {}
    if hooks is not None:
        extra["telemetry"] = telemetry_of(result, hooks, host_started)
    module.exit_json(
        changed=False,
        summary=summary_of(result, lease),
        records_path=p["records_path"],
        n_records=len(rows),
        **extra,
    )


def prompt_list_of(p: dict) -> list:
    """The prompts to send: I(synthetic_input_len) random-token prompts, else I(prompts)."""
    if p["synthetic_input_len"] is not None:
        return synthetic_prompts(64, p["synthetic_input_len"], p["seed"])
    return prompts_from_params(p["prompts"])


def warn_takeover(module: AnsibleModule, url: str, lease: Lease | None) -> None:
    """Say so when the guard ended a cut-off client of this campaign before the load."""
    if lease is not None and lease.takeover is not None:
        module.warn(f"{url}: {lease.takeover.describe()}")


def bench_spec(p: dict, prompt_list: list, points: list) -> BenchSpec:
    """The load generator's spec from the module parameters."""
    return BenchSpec(
        url=p["url"],
        prompts=prompt_list,
        points=points,
        api=p["api"],
        model=p["model"],
        sampling=SamplingSpec(
            max_new_tokens=p["max_new_tokens"], temperature=p["temperature"], ignore_eos=p["ignore_eos"]
        ),
        num_prompts=p["num_prompts"] or (10**9 if p["duration"] else 200),
        duration_s=p["duration"],
        warmup=p["warmup"],
        repeats=p["repeats"],
        first_repeat=p["first_repeat"],
        seed=p["seed"],
        flush_cache=p["flush_cache"],
        api_key=p["api_key"],
        request_timeout_s=p["request_timeout"],
        slo=Slo(ttft_ms=p["slo_ttft_ms"], tpot_ms=p["slo_tpot_ms"], e2e_ms=p["slo_e2e_ms"]),
        simulated=p["simulated"],
        procs=p["procs"],
        max_error_rate=p["max_error_rate"],
    )


def run_points(module: AnsibleModule, hooks: PointSampling | None, host_started: float) -> None:
    """I(points): each point alone, spooled as it ends; the result holds one entry per point (with its
    telemetry document when the option is on) and the call's own start and end on the host (C(clock))."""
    p = module.params
    try:
        todo = todo_points(p)
        prompt_list = prompt_list_of(p)
        specs = point_specs(bench_spec(p, prompt_list, [todo[0][1]]), todo)
        g = p["guard"] or {}
        unit, invocation = str(g.get("unit") or ""), str(g.get("invocation_id") or "")

        def ended(wait_s: float) -> str | None:
            return server_ended(unit, invocation, wait_s) if unit else None

        with sampled_load(module, p, hooks) as lease:
            points, meta, failed = measure_points(specs, p["spool"] or {}, lease, ended, hooks, host_started)
    except LOAD_ERRORS as err:
        fail_load(module, p, err)
        return
    n_records = 0
    for point in points:
        point.pop("meta", None)
        n_records += len(point["records"])
        if p["pack_records"]:
            rows = point.pop("records")
            point.update({request_rows.PACKED_KEY: request_rows.pack(rows), "n_records": len(rows)})
    extra = {"failed_point": failed} if failed else {}
    module.exit_json(
        changed=False,
        points=points,
        meta=meta,
        n_records=n_records,
        clock={"host_started": host_started, "host_ended": time.time()},
        **extra,
    )


def main() -> None:
    host_started = time.time()  # the telemetry's clock.host_started: the top of the call
    run(build_module(), host_started)


if __name__ == "__main__":
    main()
