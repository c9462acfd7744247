"""The contract between the real SGLang (pinned release, CPU engine) and the stand-in impersonating it.

One observation per surface the project depends on, taken with the same code from either server
(``Server``: the real SGLang via scripts/real-sglang/serve.sh, or the stand-in run as a sim host runs
it, ``python -m sglang.launch_server`` through the shim, impersonating the same release). The real
server's observations are recorded in ``tests/fixtures/real_sglang/<version>/contract.json``:

- the real side compares what it sees with the recording (re-record after a deliberate change with
  ``SGLBENCH_REAL_SGLANG_RECORD=1 make test-real`` and review the diff);
- the stand-in side compares what it sees with the recording; every difference must be one listed in
  ``KNOWN`` (specific to the CPU engine, or something the stand-in does not simulate), else it fails.

The ledger collects the per-surface verdicts; conftest.py prints the table (pytest -s) and writes it
into docs/contract.md when ``SGLBENCH_CONTRACT_UPDATE=1`` (scripts/contract-table.sh).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

import real_sglang
from real_sglang import CONTEXT_LENGTH as CONTEXT  # noqa: F401
from real_sglang import (  # noqa: F401 - the real server's facts, re-exported for the contract tests
    HAVE_ENV,
    MODEL,
    NO_REAL_ENV,
    READY_TIMEOUT,
    RECORD,
    REPO,
    ROOT,
    STOP_WITHIN,
    VERSION,
    free_port,
    group_members,
    read_line,
    serve_command,
)

RECORDING = REPO / "tests" / "fixtures" / "real_sglang" / VERSION / "contract.json"
OBSERVED = REPO / "build" / "contract" / VERSION
CATALOG = REPO / "python" / "sglbench" / "hostlib" / "sglang_catalogs" / f"{VERSION}.json"
SHIM = REPO / "python" / "sglbench" / "sim" / "sglang_shim"
STAND_IN_MODEL = REPO / "tests" / "fixtures" / "models" / MODEL  # the same config.json as the real one
# what scripts/real-sglang/serve.sh passes, and the stand-in gets, but --load-format: serve.sh loads a model's
# weights where it has them (auto), and the stand-in, which loads none, keeps dummy
SERVE_FLAGS = [
    "--load-format",
    "dummy",
    "--device",
    "cpu",
    "--disable-cuda-graph",
    "--attention-backend",
    "torch_native",
    "--enable-metrics",
    "--sleep-on-idle",
    "--max-total-tokens",
    "16384",
]
STAND_IN_TIME_SCALE = "0.01"
STAND_IN_READY_TIMEOUT = 300.0  # a failure bound, as READY_TIMEOUT: ~2 s quiet
SIDES = ("real", "stand-in")


def need_real_env() -> None:
    """Skip the real side without its environment (one line for every test: the same place)."""
    if not HAVE_ENV:
        pytest.skip(NO_REAL_ENV)


SPEC_OPS = ROOT / "cpu-spec-ops.txt"  # the env's check of its pure-torch sgl_kernel CPU ops


def spec_ops_verdict() -> str:
    """``ok: ...`` when the env can serve speculative decoding, else the check's one line."""
    return SPEC_OPS.read_text().strip() if SPEC_OPS.is_file() else f"no {SPEC_OPS}: run `make real-sglang`"


def need_spec_ops() -> None:
    """Skip the real speculative side, with tier.sh's line, when the env's ops check failed."""
    need_real_env()
    verdict = spec_ops_verdict()
    if not verdict.startswith("ok:"):
        pytest.skip(f"real-SGLang tier: speculative part skipped: {verdict}")


# --- the servers ----------------------------------------------------------------------------------


def comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def wait_gone(pgid: int, within: float) -> tuple[bool, float]:
    t0 = time.monotonic()
    while group_members(pgid) and time.monotonic() - t0 < within:
        time.sleep(0.05)
    return not group_members(pgid), round(time.monotonic() - t0, 1)


def stand_in_env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLBENCH_SIM_")}
    env.update(
        {
            # as on a sim host: the shim is the installed `sglang` package
            "PYTHONPATH": os.pathsep.join([str(SHIM), str(REPO / "python")]),
            "SGLBENCH_SIM_SGLANG_VERSION": VERSION,
            "SGLBENCH_SIM_TIME_SCALE": STAND_IN_TIME_SCALE,
            "SGLBENCH_SIM_STATE_DIR": str(state_dir),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@dataclass
class Server:
    side: str
    url: str
    pid: int  # the launcher (python -m sglang.launch_server), leader of its own process group
    log: Path
    proc: subprocess.Popen[str]  # serve.sh (real) or the launcher itself (stand-in)
    exit_code: int | None = None
    started: real_sglang.Started | None = None  # the real side: what serve.sh started
    shared: bool = False  # the session's shared real server (real_sglang.shared_server): stopped once
    stopped: real_sglang.Stopped | None = None

    def get(self, path: str, **kw: Any) -> requests.Response:
        return requests.get(self.url + path, timeout=120, **kw)

    def post(self, path: str, body: object, **kw: Any) -> requests.Response:
        return requests.post(self.url + path, json=body, timeout=120, **kw)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, needle: str, timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return True
            time.sleep(0.1)
        return needle in self.log_text()

    def launcher_exit_code(self, timeout: float = 60.0) -> int:
        """The launcher's exit code (serve.sh exits with it)."""
        if self.exit_code is None:
            self.exit_code = self.proc.wait(timeout=timeout)
        return self.exit_code

    def sigterm(self) -> real_sglang.Stopped:
        """SIGTERM to the launcher and what followed (the shared real server's is taken once)."""
        if self.started is not None:
            return self.started.sigterm()
        if self.stopped is None:
            self.stopped = real_sglang.sigterm_group(self.pid, self.proc)
        return self.stopped

    def stop(self) -> None:
        """Whatever is left goes (the fixture's finaliser); the shared server is left to its session."""
        if self.shared:
            return
        if self.started is not None:
            self.started.stop()
            return
        real_sglang.stop_launcher(self.proc, self.pid)


def start_real(log: Path, extra: list[str], env: dict[str, str] | None = None) -> Server:
    """A real server with serve.sh's flags plus ``extra`` (and ``env`` added to its environment); without
    either, the session's shared one."""
    need_real_env()
    shared = not extra and not env
    try:
        started = real_sglang.shared_server() if shared else real_sglang.start(log, extra, env)
    except real_sglang.NotReady as err:
        pytest.fail(str(err))
    srv = Server("real", started.url, started.pid, started.log, started.proc, started=started)
    srv.shared = shared
    return srv


def start_stand_in(log: Path, extra: list[str], state_dir: Path, env: dict[str, str] | None = None) -> Server:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(STAND_IN_MODEL),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *SERVE_FLAGS,
        *extra,
    ]
    handle = log.open("w")
    proc = subprocess.Popen(
        argv,
        stdout=handle,
        stderr=subprocess.STDOUT,
        env={**stand_in_env(state_dir), **(env or {})},
        text=True,
        start_new_session=True,
    )
    handle.close()
    srv = Server("stand-in", f"http://127.0.0.1:{port}", proc.pid, log, proc)
    deadline = time.monotonic() + STAND_IN_READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"the stand-in exited ({proc.returncode}) before it was ready:\n{srv.log_text()[-3000:]}"
            )
        if "The server is fired up and ready to roll!" in srv.log_text():
            with contextlib.suppress(requests.RequestException):
                if requests.get(srv.url + "/health", timeout=5).status_code == 200:
                    return srv
        time.sleep(0.05)
    srv.stop()
    waited = f"{STAND_IN_READY_TIMEOUT:.0f} s"
    pytest.fail(f"the stand-in was not ready within {waited}:\n{srv.log_text()[-3000:]}")
    raise AssertionError("unreachable")


def start(
    side: str, log: Path, extra: list[str], state_dir: Path, env: dict[str, str] | None = None
) -> Server:
    if side == "real":
        return start_real(log, extra, env)
    return start_stand_in(log, extra, state_dir, env)


def launch_command(side: str, args: list[str], state_dir: Path, timeout: float = 900) -> tuple[int, str, str]:
    """Run ``python -m sglang.launch_server ARGS`` of one side to its exit: (code, stdout, stderr).

    The real release imports torch and its kernels before argparse answers: ~5 s on a quiet machine,
    over 120 s on a loaded 2-core one; the bound only ends a hung run, hence generous."""
    if side == "real":
        need_real_env()
        cmd = ["bash", "-c", f'source "{ROOT}/env.sh" && exec "{ROOT}/venv/bin/python" "$@"', "python"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLBENCH_SIM_")}
    else:
        cmd = [sys.executable]
        env = stand_in_env(state_dir)
    proc = subprocess.run(
        [*cmd, "-m", "sglang.launch_server", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


# --- SSE ------------------------------------------------------------------------------------------


def sse(resp: requests.Response) -> tuple[bytes, list[str]]:
    """The raw body and its ``data:`` payloads (one data line per event, blank line after each)."""
    raw = b"".join(resp.iter_content(chunk_size=None))
    events = []
    for block in raw.decode().split("\n\n")[:-1]:
        assert block.startswith("data: ") and "\n" not in block, block[:200]
        events.append(block[len("data: ") :])
    return raw, events


def key_tree(obj: Any) -> Any:
    """The keys of a JSON value (recursively; a list shows its first element), without the values."""
    if isinstance(obj, dict):
        return {k: key_tree(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [key_tree(obj[0])] if obj else []
    return type(obj).__name__ if obj is not None else None


def mask_numbers(text: str) -> str:
    """Numbers not part of a name become N (token counts of text prompts differ between tokenizers), with
    their sign: the CPU engine's "mem usage=-0.00 GB" (memory freed while loading) is a number like any."""
    masked = re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])", "N", text)
    return re.sub(r"(?<=[=:\s(\[,])-N\b", "N", masked)


# --- the recording, the comparison, the ledger ----------------------------------------------------


def recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text()) if RECORDING.exists() else {}


_record_lock = threading.Lock()


def record(surface: str, observation: Any) -> None:
    with _record_lock:
        data = recorded()
        data[surface] = observation
        RECORDING.parent.mkdir(parents=True, exist_ok=True)
        RECORDING.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def save_observed(side: str, surface: str, observation: Any) -> None:
    path = OBSERVED / side / f"{surface}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(observation, indent=2, sort_keys=True, default=str) + "\n")


@dataclass(frozen=True)
class Diff:
    kind: str  # "real only" | "stand-in only" | "differs"
    item: str  # what differs (a key, a flag, a metric, a log line's name)
    detail: str = ""

    def text(self) -> str:
        return f"{self.kind}: {self.item}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Known:
    """A documented difference: ``kind`` and ``item`` (a regex on Diff.item) and why."""

    kind: str
    item: str
    category: str  # "CPU engine" | "not simulated" | "stand-in marker" | "catalog"
    why: str

    def matches(self, diff: Diff) -> bool:
        return self.kind == diff.kind and re.fullmatch(self.item, diff.item) is not None


def compare(real: Any, stand_in: Any, path: str = "") -> list[Diff]:
    """Differences between two observations (nested dicts compare per key; lists of strings as sets
    when both are sorted, else as values)."""
    if isinstance(real, dict) and isinstance(stand_in, dict):
        out: list[Diff] = []
        for key in sorted(set(real) | set(stand_in)):
            where = f"{path}.{key}" if path else str(key)
            if key not in stand_in:
                out.append(Diff("real only", where))
            elif key not in real:
                out.append(Diff("stand-in only", where))
            else:
                out.extend(compare(real[key], stand_in[key], where))
        return out
    if (
        isinstance(real, list)
        and isinstance(stand_in, list)
        and all(isinstance(x, str) for x in [*real, *stand_in])
        and real == sorted(real)
        and stand_in == sorted(stand_in)
    ):
        out = [Diff("real only", f"{path}[{x}]") for x in real if x not in stand_in]
        return out + [Diff("stand-in only", f"{path}[{x}]") for x in stand_in if x not in real]
    if real != stand_in:
        if isinstance(real, str) and isinstance(stand_in, str):
            a, b = around_difference(real, stand_in)
            return [Diff("differs", path, f"real {a!r} / stand-in {b!r}")]
        return [Diff("differs", path, f"real {short(real)} / stand-in {short(stand_in)}")]
    return []


def around_difference(a: str, b: str, before: int = 16, width: int = 44) -> tuple[str, str]:
    """Where two strings part: a few characters of common text, then each one's own part."""
    i = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, i - before)

    def cut(text: str) -> str:
        part = text[start : i + width]
        return ("…" if start else "") + part + ("…" if len(text) > i + width else "")

    return cut(a), cut(b)


def short(value: Any, limit: int = 90) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Row:
    surface: str
    title: str
    real: str = "not run"  # "live" | "recorded" | "not run"
    stand_in: str = "not run"
    diffs: list[tuple[Diff, Known | None]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.stand_in == "not run" or self.real == "not run":
            return "not compared"
        if not self.diffs:
            return "agrees"
        undocumented = [d for d, k in self.diffs if k is None]
        if undocumented:
            return "DIFFERS (undocumented)"
        kinds = {d.kind for d, _ in self.diffs}
        if kinds == {"real only"}:
            return "real only (documented)"
        if kinds == {"stand-in only"}:
            return "stand-in only (documented)"
        return "differs (documented)"

    def notes(self) -> list[str]:
        groups: dict[str, list[str]] = {}
        for diff, known in self.diffs:
            why = f"{known.category}: {known.why}" if known else "UNDOCUMENTED"
            groups.setdefault(why, []).append(diff.text())
        out = []
        for why, items in groups.items():
            shown = ", ".join(items[:6]) + (f", ... ({len(items)} in all)" if len(items) > 6 else "")
            out.append(f"{shown} — {why}")
        return out


class Ledger:
    """What this session saw, per surface; conftest.py renders it."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def row(self, surface: str) -> Row:
        if surface not in self.rows:
            self.rows[surface] = Row(surface, SURFACES.get(surface, surface))
        return self.rows[surface]


LEDGER = Ledger()


def check(
    side: str, surface: str, observation: Any, *, real_subset: Callable[[Any, Any], bool] | None = None
) -> None:
    """The contract step of every test: save the observation, then

    - real side: record it (SGLBENCH_REAL_SGLANG_RECORD=1) or compare it with the recording;
    - stand-in side: compare it with the recorded real one; differences not in KNOWN fail.
    """
    observation = json.loads(json.dumps(observation, default=str))  # what JSON keeps (tuples -> lists)
    save_observed(side, surface, observation)
    row = LEDGER.row(surface)
    if side == "real":
        row.real = "live"
        if RECORD:
            record(surface, observation)
            return
        want = recorded().get(surface)
        if want is None:
            pytest.fail(
                f"no recording of {surface!r}; record it with SGLBENCH_REAL_SGLANG_RECORD=1 make test-real"
            )
        same = real_subset(want, observation) if real_subset else observation == want
        assert same, (
            f"the real SGLang {VERSION} answers {surface!r} differently from its recording "
            f"({RECORDING.relative_to(REPO)}): {[d.text() for d in compare(want, observation)][:20]}; "
            "if that is "
            "deliberate (new pin, other flags), re-record with SGLBENCH_REAL_SGLANG_RECORD=1 make test-real"
        )
        return
    row.stand_in = "live"
    want = recorded().get(surface)
    if want is None:
        pytest.fail(f"no recording of the real {surface!r} to compare the stand-in with ({RECORDING})")
    if row.real == "not run":
        row.real = "recorded"
    diffs = compare(want, observation)
    known = KNOWN.get(surface, [])
    row.diffs = [(d, next((k for k in known if k.matches(d)), None)) for d in diffs]
    undocumented = [d.text() for d, k in row.diffs if k is None]
    assert not undocumented, (
        f"the stand-in differs from the real SGLang {VERSION} on {surface!r}: {undocumented}; fix the "
        "stand-in (python/sglbench/sim) or, when it is specific to the CPU engine or deliberately not "
        "simulated, document it in KNOWN (tests/contract/contract_lib.py) and docs/contract.md"
    )


def metrics_families(text: str) -> dict[str, dict[str, Any]]:
    """Prometheus text: ``{name: {"type": ..., "labels": [label names of its samples]}}``."""
    fams: dict[str, dict[str, Any]] = {}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        fams[name] = {"type": kind, "labels": set()}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([^{\s]+)(?:\{([^}]*)\})? ", line)
        if not m:
            continue
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count|created)$", "", name)
        fam = fams.get(name) or fams.get(base)
        if fam is not None:
            fam["labels"] |= set(re.findall(r'(\w+)="', m.group(2) or ""))
    return {k: {"type": v["type"], "labels": sorted(v["labels"] - {"le"})} for k, v in sorted(fams.items())}


def help_options(text: str) -> dict[str, list[str] | None]:
    """``--help`` of an argparse parser: every option string, with its shown choices (or None)."""
    section = re.split(r"\n(?:options|optional arguments):\n", text, maxsplit=1)[-1]
    out: dict[str, list[str] | None] = {}
    for line in section.splitlines():
        m = re.match(r"^  (-[^ ].*?)(?:  +\S.*)?$", line)
        if not m:
            continue
        for part in re.split(r", (?=-)", m.group(1)):
            opt, _, metavar = part.partition(" ")
            choices = None
            if metavar.startswith("{") and metavar.endswith("}"):
                choices = sorted(metavar[1:-1].split(","))
            out[opt] = choices
    out.pop("-h", None)
    out.pop("--help", None)
    return dict(sorted(out.items()))


def catalog_options() -> dict[str, list[str] | None]:
    data = json.loads(CATALOG.read_text())
    out: dict[str, list[str] | None] = {}
    for flag in data["flags"]:
        for opt in flag["opts"]:
            choices = flag.get("choices") if flag.get("action", "store") == "store" else None
            out[opt] = sorted(str(c) for c in choices) if choices and flag.get("nargs") is None else None
    return dict(sorted(out.items()))


def first(lines: Iterable[str], pattern: str) -> str | None:
    return next((ln for ln in lines if re.search(pattern, ln)), None)


def log_shape(line: str | None) -> str | None:
    """A log line without its timestamp, numbers as N."""
    if line is None:
        return None
    return mask_numbers(re.sub(r"^\[\d{4}-[^]]*\] ", "", line.strip()))


# --- the surfaces and their documented differences ------------------------------------------------

SURFACES: dict[str, str] = {
    "flags.help": "launch flags: `--help` of each side (the real one vs the stand-in's catalog parser)",
    "flags.catalog": "launch flags: the real `--help` vs the flag catalog sglang_catalogs/0.5.23.json",
    "flags.errors": "bad flags: exit code and argparse's error line",
    "startup.log": "startup log lines hostlib/sglang_logs.py parses (shapes, numbers as N)",
    "startup.parsed": "what sglang_logs.parse_startup_log finds in the startup log",
    "server_info.keys": "/server_info top-level keys",
    "server_info.internal_states": "/server_info internal_states[0] keys and memory_usage",
    "server_info.normalised": "server_api.normalise_server_info of /server_info (types; comparable values)",
    "model_info": "/model_info and /v1/models keys",
    "generate": "/generate (not streamed): top-level keys, meta_info keys, finish_reason",
    "generate.stream": "/generate streamed: SSE framing, cumulative chunks, meta_info keys per chunk",
    "chat": "/v1/chat/completions (not streamed): keys, usage, metadata",
    "chat.stream": "/v1/chat/completions streamed: chunk/choice/delta keys, usage chunk",
    "completions": "/v1/completions (not streamed): keys, usage, metadata",
    "completions.stream": "/v1/completions streamed: chunk keys, usage chunk",
    "metrics": "/metrics: family names, types, label names (every stand-in family must be real)",
    "errors.context": "errors: input longer than the context, input + max_new_tokens over it (all APIs)",
    "errors.max_req_input_len": "errors: input over max_req_input_len (the scheduler's check)",
    "errors.kv_below_context": "--max-total-tokens below the context: start-up warning, limits, errors",
    "queue.over_max_running": "requests over --max-running-requests queue; over --max-queued-requests abort",
    "loads": "/get_load vs /v1/loads",
    "http.misc": "/health, /health_generate, /flush_cache, 404, text + input_ids together",
    "shutdown.sigterm": "SIGTERM to the launcher: exit code, process tree gone, what it logs",
    "shutdown.sigkill": "SIGKILL to the launcher: its subprocesses die too (PR_SET_PDEATHSIG)",
    "flags.spec_errors": "bad speculative flags: exit code and the line that says why (argparse, ServerArgs)",
}
SPEC_CASES = {  # test_contract_spec.py's servers
    "ngram": "NGRAM, 4 draft tokens",
    "standalone": "STANDALONE, draft = the target's weights, 2 steps, topk 1, 3 draft tokens",
    "ngram.sim_acc_len": "NGRAM with SGLANG_SIMULATE_ACC_LEN=2.5 (match-expected, token mode fixed)",
}
for _case, _what in SPEC_CASES.items():
    SURFACES |= {
        f"spec.{_case}.generate": f"{_what}: final meta_info spec fields, their types and relations",
        f"spec.{_case}.stream": f"{_what}: stream: spec fields in the last chunk only, chunks per step",
        f"spec.{_case}.server_info": f"{_what}: /server_info and internal_states speculative keys",
        f"spec.{_case}.metrics": f"{_what}: /metrics speculative families, the verify-call counter",
    }

CPU = "CPU engine"
NOT_SIMULATED = "not simulated"
MARKER = "stand-in marker"
CATALOG_GAP = "catalog"

KNOWN: dict[str, list[Known]] = {
    "flags.help": [
        Known(
            "real only",
            r"--(metrics-host|metrics-port|servicer-impl)",
            CATALOG_GAP,
            "added at launch by the smg-grpc-servicer plugin (a dependency of the sglang wheel, entry point "
            "sglang.srt.plugins), not by the wheel's own parser the catalog is read from; the stand-in "
            "refuses them (exit 2) — reported, for scripts/sglang_catalog.py",
        ),
        Known(
            "stand-in only",
            r"--forward-pass-metrics-(ipc-name|worker-id)",
            CATALOG_GAP,
            "help=argparse.SUPPRESS in 0.5.23: accepted by both, listed only by the stand-in's --help "
            "(the catalog does not record hidden help)",
        ),
    ],
    "flags.catalog": [
        Known(
            "real only",
            r"--(metrics-host|metrics-port|servicer-impl)",
            CATALOG_GAP,
            "plugin flags, see flags.help",
        ),
        Known("stand-in only", r"--forward-pass-metrics-(ipc-name|worker-id)", CATALOG_GAP, "hidden flags"),
    ],
    "flags.errors": [
        Known(
            "differs",
            r"invalid_choice\.error",
            CATALOG_GAP,
            "the same choices in another order: the catalog keeps them sorted, the release in its own order",
        ),
        Known(
            "differs",
            r"\w+\.usage",
            CATALOG_GAP,
            "the usage block lists the flags alphabetically (the catalog's order), the release in "
            "declaration order (--model-path first)",
        ),
    ],
    "startup.log": [
        Known(
            "differs",
            r"summary",
            CPU,
            "the CPU engine reports available_cpu_mem= (free host RAM), a GPU available_gpu_mem=",
        ),
        Known(
            "differs",
            r"(prefill|decode)_batch",
            CPU,
            "`cpu graph: False` on the CPU engine, `cuda graph:` on GPUs",
        ),
    ],
    "startup.parsed": [
        Known(
            "differs",
            r"(summary\.)?available_(gpu|cpu)_mem_gib",
            CPU,
            "free host RAM on the CPU engine, GPU memory on the stand-in",
        ),
    ],
    "errors.kv_below_context": [
        Known("differs", r"summary", CPU, "available_cpu_mem= on the CPU engine (see startup.log)"),
    ],
    "server_info.keys": [
        Known("stand-in only", r"keys\[sglbench_sim\]", MARKER, "marks every answer as simulated"),
    ],
    "server_info.normalised": [
        Known(
            "differs",
            r"values\.(chunked_prefill_size|mem_fraction_static)",
            CPU,
            "defaults the CPU engine derives from host RAM (4096; 0.719); the stand-in takes the GPU's",
        ),
    ],
    "model_info": [
        Known("stand-in only", r"model_info\[sglbench_simulated\]", MARKER, "marks the answer as simulated"),
    ],
    "metrics": [
        Known(
            "real only",
            r".*",
            NOT_SIMULATED,
            "families the stand-in does not produce (every family it does produce exists in 0.5.23 with the "
            "same type and labels)",
        ),
    ],
}
