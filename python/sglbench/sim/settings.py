"""Stand-in settings: every ``SGLBENCH_SIM_*`` environment variable, parsed in one place.

``VARIABLES`` is the single list of supported variables (name, default, meaning); the README
table is checked against it by the tests. Bad values fail with a message naming the variable.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from sglbench.hostlib import capacity_variants, gpus, sglang_facts
from sglbench.sim import faultplan, release

# (name, default shown in the docs, meaning)
VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "SGLBENCH_SIM_TIME_SCALE",
        "1.0",
        "Multiplies every simulated duration (startup phases and token timing). 1.0 = real-world, 0.01 = "
        "100x faster.",
    ),
    (
        "SGLBENCH_SIM_SEED",
        "0",
        "Seed for generated text, output lengths and speculative acceptance (combined with the request "
        "content).",
    ),
    (
        "SGLBENCH_SIM_GPU",
        "rtx-pro-6000",
        "GPU kind: a key ("
        + ", ".join(k.key for k in gpus.GPU_KINDS)
        + "), the planner's name for it or its full nvidia-smi name.",
    ),
    ("SGLBENCH_SIM_GPU_COUNT", "8", "Number of simulated GPUs on the host."),
    ("SGLBENCH_SIM_GPU_MEM_MIB", "(per kind)", "Override the per-GPU memory (MiB) of the GPU kind."),
    (
        "SGLBENCH_SIM_GPU_BANDWIDTH_GBPS",
        "(per kind)",
        "Override the GPU memory bandwidth (GB/s) used for decode timing.",
    ),
    (
        "SGLBENCH_SIM_NICE",
        "0",
        "CPU niceness the server and its workers add to their own: its CPU work stands for GPU work, so "
        "with 10 (the sim inventory's) the benchmark client beside it on the host gets a CPU first.",
    ),
    (
        "SGLBENCH_SIM_STATE_DIR",
        "/run/sglbench-sim if writable, else $TMPDIR/sglbench-sim",
        "Where live stand-in processes register the GPU memory they hold (read by the nvidia-smi stand-in).",
    ),
    (
        "SGLBENCH_SIM_SGLANG_VERSION",
        "newest catalogued public release",
        "The SGLang release the stand-in impersonates: its launch flags (a flag it lacks exits 2), "
        "spellings and defaults (its flag catalog, or the nearest catalogued release), the version in "
        "/server_info and sglang.__version__, and the accounting variant if SGLBENCH_SIM_ACCOUNTING is "
        "unset.",
    ),
    (
        "SGLBENCH_SIM_ACCOUNTING",
        "(by version)",
        "SGLang memory-accounting and log variant to emulate: A (<= May 2026, < 0.5.12, V1 log lines), B "
        "(Jun-Jul 2026, 0.5.12-0.5.15), C (Aug 2026+, >= 0.5.16). B and C print the V3 'KV Cache is "
        "allocated. dtype: ...' form. Unset: the impersonated version's own variant.",
    ),
    (
        "SGLBENCH_SIM_WEIGHTS_GIB",
        "(planner)",
        "Per-rank target weight memory in GiB (default: the capacity planner's estimate).",
    ),
    ("SGLBENCH_SIM_DRAFT_WEIGHTS_GIB", "(planner)", "Draft model weight memory in GiB."),
    ("SGLBENCH_SIM_INIT_SECONDS", "4.0", "Simulated torch-distributed init time (scaled)."),
    ("SGLBENCH_SIM_LOAD_GIBPS", "2.0", "Simulated weight loading speed in GiB/s (scaled)."),
    (
        "SGLBENCH_SIM_GRAPH_SECONDS",
        "20.0",
        "Simulated CUDA graph capture time per worker (scaled; 0 with --disable-cuda-graph).",
    ),
    (
        "SGLBENCH_SIM_SLOW_START_SECONDS",
        "0",
        "Fault: extra startup delay (scaled) before weights load, to exercise readiness timeouts.",
    ),
    (
        "SGLBENCH_SIM_FAIL_LOAD",
        "(unset)",
        "Fault: fail during weight load. 'oom' (or 1) = torch.OutOfMemoryError, 'corrupt' = safetensors "
        "header error.",
    ),
    (
        "SGLBENCH_SIM_NEVER_READY",
        "0",
        "Fault: 1 = HTTP server starts but the warmup never finishes (/health stays 503).",
    ),
    (
        "SGLBENCH_SIM_CRASH_AFTER_REQUESTS",
        "0",
        "Fault: N > 0 = the server crashes (scheduler exception, exit 1) after finishing N generation "
        "requests.",
    ),
    (
        "SGLBENCH_SIM_FAULT_PLAN",
        "<state dir>/fault-plan",
        "Fault: a file holding one line, stop N or kill N. The first server to become ready takes it (the "
        "file is removed) and at its N-th generation request writes FILE.fired with its pid, then sends "
        "itself SIGSTOP (hung) or SIGKILL (died): a fault that lands in a chosen benchmark point however "
        "fast the machine (sglbench/sim/faultplan.py).",
    ),
    (
        "SGLBENCH_SIM_ERROR_RATE",
        "0",
        "Fault: fraction (0..1) of generation requests answered with HTTP 500 (deterministic under the "
        "seed).",
    ),
    (
        "SGLBENCH_SIM_ORPHAN_WORKER",
        "0",
        "Fault: 1 = on SIGTERM the main process exits but leaves one TP worker alive holding its GPU memory.",
    ),
    (
        "SGLBENCH_SIM_ORPHAN_TTL_SECONDS",
        "0",
        "Real seconds an orphaned worker lives before exiting by itself (0 = until killed).",
    ),
    (
        "SGLBENCH_SIM_ACCEPT_LENGTH",
        "(per algorithm)",
        "Mean speculative accept length per verify step incl. the bonus token ("
        + ", ".join(f"{a.name} {a.sim_accept_length}" for a in sglang_facts.SPEC_TABLE)
        + "; capped at the draft token count).",
    ),
    (
        "SGLBENCH_SIM_ACCEPT_DIST",
        "(geometric)",
        "Explicit accept-length distribution: comma-separated weights for lengths 1, 2, ... (overrides the "
        "mean).",
    ),
    (
        "SGLBENCH_SIM_OUTPUT_LEN",
        "256",
        "Mean natural output length (tokens) before EOS when ignore_eos is false (deterministic per "
        "request).",
    ),
    (
        "SGLBENCH_SIM_PREFILL_TOKENS_PER_S",
        "(derived)",
        "Override the prefill speed (tokens/s at time scale 1; default from GPU FLOPs and model size).",
    ),
    (
        "SGLBENCH_SIM_THROTTLE",
        "(unset)",
        "Fault: a throttling episode, OFFSET:DURATION[:KIND] in real seconds from when the server is ready, "
        "KIND power (default, SW power cap) or thermal (HW thermal slowdown). During it the nvidia-smi "
        "stand-in reports the reason bit in clocks_event_reasons.active, lower SM clocks and lower power on "
        "the server's GPUs (sglbench/sim/power.py).",
    ),
    (
        "SGLBENCH_SIM_THROTTLE_FROM",
        "ready",
        "What SGLBENCH_SIM_THROTTLE's OFFSET counts from: ready (the server is ready), request (its first "
        "generation request, health probes aside) or request:N (its N-th): a request of a campaign's point, "
        "however long the campaign took to get there.",
    ),
    (
        "SGLBENCH_SIM_POWER_LEDGER",
        "0",
        "1: the power meter also appends its account (wall time, cumulative energy per GPU) at every change "
        "to <state dir>/power/<pid>.ledger, kept after the server exits: the energy the GPUs drew over any "
        "window, for tests to hold the sampled telemetry to (sglbench/sim/power.py).",
    ),
    (
        "SGLBENCH_SIM_DIVERGE",
        "(unset)",
        "Fault: speculative configs stop being lossless. SHARE[:POSITION]: that share (0-1) of speculative "
        "requests, picked deterministically per request, returns a different token id at output POSITION "
        "(default 8) than the same request without speculative decoding; the losslessness gate must catch "
        "it.",
    ),
)

_KNOWN = {name for name, _d, _m in VARIABLES}


def markdown_table() -> str:
    """The README's settings table (the README must contain exactly this; a test checks it)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in VARIABLES]
    return "\n".join(rows)


class SimSettingsError(ValueError):
    """A malformed SGLBENCH_SIM_* value (the message names the variable)."""


def default_state_dir() -> str:
    """``/run/sglbench-sim`` when usable, else ``$TMPDIR/sglbench-sim``; created world-writable
    (sticky) so stand-ins running as any user and the nvidia-smi stand-in share one registry."""
    candidates = ["/run/sglbench-sim", os.path.join(tempfile.gettempdir(), "sglbench-sim")]
    for path in candidates:
        if os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK):
            return path
        parent = os.path.dirname(path)
        if not os.path.exists(path) and os.access(parent, os.W_OK):
            try:
                os.makedirs(path, exist_ok=True)
                os.chmod(path, 0o1777)
                return path
            except OSError:
                continue
    return candidates[-1]


THROTTLE_KINDS = ("power", "thermal")


def _throttle_from(env: Mapping[str, str]) -> int:
    """SGLBENCH_SIM_THROTTLE_FROM as the generation request the episode's offset counts from (0: ready)."""
    raw = (_get(env, "SGLBENCH_SIM_THROTTLE_FROM") or "ready").lower()
    if raw == "ready":
        return 0
    kind, _, n = raw.partition(":")
    if kind == "request" and (not n or (n.isdigit() and int(n) >= 1)):
        return int(n or 1)
    raise SimSettingsError(f"SGLBENCH_SIM_THROTTLE_FROM={raw!r} must be ready, request or request:N (N >= 1)")


@dataclass(frozen=True)
class Throttle:
    """A throttling episode: ``offset_s`` real seconds after the server is ready, for ``duration_s``."""

    offset_s: float
    duration_s: float
    kind: str = "power"


def _throttle(env: Mapping[str, str]) -> Throttle | None:
    raw = _get(env, "SGLBENCH_SIM_THROTTLE")
    if raw is None or raw.lower() in ("0", "off", "no", "false"):
        return None
    parts = [x.strip() for x in raw.split(":")]
    usage = "give OFFSET:DURATION[:KIND] in seconds, e.g. 5:3 or 5:3:thermal"
    if len(parts) not in (2, 3):
        raise SimSettingsError(f"SGLBENCH_SIM_THROTTLE={raw!r}: {usage}")
    try:
        offset, duration = float(parts[0]), float(parts[1])
    except ValueError:
        raise SimSettingsError(f"SGLBENCH_SIM_THROTTLE={raw!r}: {usage}") from None
    kind = parts[2].lower() if len(parts) == 3 else "power"
    if offset < 0 or duration <= 0 or kind not in THROTTLE_KINDS:
        raise SimSettingsError(
            f"SGLBENCH_SIM_THROTTLE={raw!r}: offset >= 0, duration > 0, "
            f"kind one of {', '.join(THROTTLE_KINDS)}"
        )
    return Throttle(offset, duration, kind)


@dataclass(frozen=True)
class Diverge:
    """Injected divergence of speculative outputs: ``share`` of requests differ at output ``position``."""

    share: float
    position: int = 8


def _diverge(env: Mapping[str, str]) -> Diverge | None:
    raw = _get(env, "SGLBENCH_SIM_DIVERGE")
    if raw is None or raw.lower() in ("0", "off", "no", "false"):
        return None
    usage = "give SHARE[:POSITION], a share from 0 to 1 and a token position >= 0, e.g. 0.25 or 0.25:16"
    parts = [x.strip() for x in raw.split(":")]
    try:
        share = float(parts[0])
        position = int(parts[1]) if len(parts) == 2 else 8
    except (ValueError, IndexError):
        raise SimSettingsError(f"SGLBENCH_SIM_DIVERGE={raw!r}: {usage}") from None
    if len(parts) > 2 or not 0 <= share <= 1 or position < 0:
        raise SimSettingsError(f"SGLBENCH_SIM_DIVERGE={raw!r}: {usage}")
    return Diverge(share, position)


@dataclass(frozen=True)
class SimSettings:
    time_scale: float = 1.0
    seed: int = 0
    gpu: str = "rtx-pro-6000"
    gpu_count: int = 8
    gpu_mem_mib: int | None = None
    gpu_bandwidth_gbps: float | None = None
    state_dir: str = ""
    sglang_version: str = ""  # load_settings: the impersonated version (never empty)
    sglang_release: str = ""  # the flag catalog it parses with (the version itself when catalogued)
    accounting: str | None = None
    weights_gib: float | None = None
    draft_weights_gib: float | None = None
    init_seconds: float = 4.0
    load_gibps: float = 2.0
    graph_seconds: float = 20.0
    slow_start_seconds: float = 0.0
    fail_load: str | None = None
    never_ready: bool = False
    crash_after_requests: int = 0
    error_rate: float = 0.0
    orphan_worker: bool = False
    orphan_ttl_seconds: float = 0.0
    accept_length: float | None = None
    accept_dist: tuple[float, ...] | None = None
    # SGLang's own benchmark knobs (srt/environ.py), honoured as 0.5.23 does: SGLANG_SIMULATE_ACC_LEN (None:
    # off, SGLang's value <= 0), SGLANG_SIMULATE_ACC_METHOD, SGLANG_SIMULATE_ACC_TOKEN_MODE
    simulate_acc_len: float | None = None
    simulate_acc_method: str = "match-expected"
    simulate_acc_token_mode: str = "fixed"
    output_len: int = 256
    prefill_tokens_per_s: float | None = None
    throttle: Throttle | None = None
    diverge: Diverge | None = None
    throttle_from_request: int = 0  # 0: the throttle's offset counts from ready, N: from the N-th request
    power_ledger: bool = False
    nice: int = 0
    fault_plan: str = ""  # load_settings: the fault-plan file's path (never empty)

    def scaled(self, seconds: float) -> float:
        """Real seconds to wait for ``seconds`` of simulated time."""
        return max(0.0, seconds * self.time_scale)


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """SGLBENCH_SIM_* names that are set but not supported (likely typos; the stand-in warns)."""
    env = os.environ if env is None else env
    return sorted(k for k in env if k.startswith("SGLBENCH_SIM_") and k not in _KNOWN)


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return None if value is None or value.strip() == "" else value.strip()


def _float(
    env: Mapping[str, str],
    name: str,
    default: float | None,
    *,
    lo: float | None = None,
    hi: float | None = None,
) -> float | None:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SimSettingsError(f"{name}={raw!r} is not a number") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise SimSettingsError(f"{name}={raw!r} must be in [{lo}, {hi}]")
    return value


def _int(env: Mapping[str, str], name: str, default: int | None, *, lo: int = 0) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SimSettingsError(f"{name}={raw!r} is not an integer") from None
    if value < lo:
        raise SimSettingsError(f"{name}={raw!r} must be >= {lo}")
    return value


def _bool(env: Mapping[str, str], name: str) -> bool:
    raw = _get(env, name)
    if raw is None:
        return False
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise SimSettingsError(f"{name}={raw!r}: use 1 or 0")


def load_settings(env: Mapping[str, str] | None = None) -> SimSettings:
    """Read every SGLBENCH_SIM_* variable; raise :class:`SimSettingsError` on a bad value."""
    env = os.environ if env is None else env
    accounting = _get(env, "SGLBENCH_SIM_ACCOUNTING")
    if accounting is not None:
        accounting = accounting.upper()
        if accounting not in capacity_variants.VARIANTS:
            known = ", ".join(capacity_variants.VARIANTS)
            raise SimSettingsError(f"SGLBENCH_SIM_ACCOUNTING={accounting!r} must be one of {known}")
    try:
        impersonated = release.resolve(release.version_from_env(env))
    except release.ReleaseError as exc:
        raise SimSettingsError(str(exc)) from None
    fail_load = _get(env, "SGLBENCH_SIM_FAIL_LOAD")
    if fail_load is not None:
        fail_load = fail_load.lower()
        if fail_load in ("0", "false", "no", "off"):
            fail_load = None
        elif fail_load in ("1", "true", "yes", "on"):
            fail_load = "oom"
        elif fail_load not in ("oom", "corrupt"):
            raise SimSettingsError(f"SGLBENCH_SIM_FAIL_LOAD={fail_load!r} must be oom, corrupt, 1 or 0")
    dist_raw = _get(env, "SGLBENCH_SIM_ACCEPT_DIST")
    accept_dist = None
    if dist_raw is not None:
        try:
            accept_dist = tuple(float(x) for x in dist_raw.split(","))
        except ValueError:
            raise SimSettingsError(
                f"SGLBENCH_SIM_ACCEPT_DIST={dist_raw!r}: give comma-separated weights, e.g. 0.1,0.2,0.7"
            ) from None
        if not accept_dist or any(w < 0 for w in accept_dist) or sum(accept_dist) <= 0:
            raise SimSettingsError(f"SGLBENCH_SIM_ACCEPT_DIST={dist_raw!r}: weights must be >= 0, sum > 0")
    simulate_raw = _get(env, "SGLANG_SIMULATE_ACC_LEN")
    try:
        simulate_acc_len = float(simulate_raw) if simulate_raw is not None else -1.0
    except ValueError:
        raise SimSettingsError(f"SGLANG_SIMULATE_ACC_LEN={simulate_raw!r} is not a number") from None
    simulate_acc_method = _get(env, "SGLANG_SIMULATE_ACC_METHOD") or "match-expected"
    simulate_acc_token_mode = _get(env, "SGLANG_SIMULATE_ACC_TOKEN_MODE") or "fixed"
    time_scale = _float(env, "SGLBENCH_SIM_TIME_SCALE", 1.0, lo=0.0)
    state_dir = _get(env, "SGLBENCH_SIM_STATE_DIR") or default_state_dir()
    return SimSettings(
        time_scale=float(time_scale if time_scale is not None else 1.0),
        seed=int(_int(env, "SGLBENCH_SIM_SEED", 0) or 0),
        gpu=_get(env, "SGLBENCH_SIM_GPU") or "rtx-pro-6000",
        gpu_count=int(_int(env, "SGLBENCH_SIM_GPU_COUNT", 8, lo=1) or 8),
        gpu_mem_mib=_int(env, "SGLBENCH_SIM_GPU_MEM_MIB", None, lo=1),
        gpu_bandwidth_gbps=_float(env, "SGLBENCH_SIM_GPU_BANDWIDTH_GBPS", None, lo=1.0),
        state_dir=state_dir,
        nice=int(_int(env, "SGLBENCH_SIM_NICE", 0, lo=0) or 0),
        sglang_version=impersonated.version,
        sglang_release=impersonated.release,
        accounting=accounting,
        weights_gib=_float(env, "SGLBENCH_SIM_WEIGHTS_GIB", None, lo=0.0),
        draft_weights_gib=_float(env, "SGLBENCH_SIM_DRAFT_WEIGHTS_GIB", None, lo=0.0),
        init_seconds=float(_float(env, "SGLBENCH_SIM_INIT_SECONDS", 4.0, lo=0.0) or 0.0),
        load_gibps=float(_float(env, "SGLBENCH_SIM_LOAD_GIBPS", 2.0, lo=0.001) or 2.0),
        graph_seconds=float(_float(env, "SGLBENCH_SIM_GRAPH_SECONDS", 20.0, lo=0.0) or 0.0),
        slow_start_seconds=float(_float(env, "SGLBENCH_SIM_SLOW_START_SECONDS", 0.0, lo=0.0) or 0.0),
        fail_load=fail_load,
        never_ready=_bool(env, "SGLBENCH_SIM_NEVER_READY"),
        crash_after_requests=int(_int(env, "SGLBENCH_SIM_CRASH_AFTER_REQUESTS", 0) or 0),
        error_rate=float(_float(env, "SGLBENCH_SIM_ERROR_RATE", 0.0, lo=0.0, hi=1.0) or 0.0),
        orphan_worker=_bool(env, "SGLBENCH_SIM_ORPHAN_WORKER"),
        orphan_ttl_seconds=float(_float(env, "SGLBENCH_SIM_ORPHAN_TTL_SECONDS", 0.0, lo=0.0) or 0.0),
        accept_length=_float(env, "SGLBENCH_SIM_ACCEPT_LENGTH", None, lo=1.0),
        accept_dist=accept_dist,
        simulate_acc_len=simulate_acc_len if simulate_acc_len > 0 else None,
        simulate_acc_method=simulate_acc_method,
        simulate_acc_token_mode=simulate_acc_token_mode,
        output_len=int(_int(env, "SGLBENCH_SIM_OUTPUT_LEN", 256, lo=1) or 256),
        prefill_tokens_per_s=_float(env, "SGLBENCH_SIM_PREFILL_TOKENS_PER_S", None, lo=1.0),
        throttle=_throttle(env),
        diverge=_diverge(env),
        throttle_from_request=_throttle_from(env),
        power_ledger=_bool(env, "SGLBENCH_SIM_POWER_LEDGER"),
        fault_plan=_get(env, "SGLBENCH_SIM_FAULT_PLAN") or faultplan.default_path(state_dir),
    )
