"""GPU and server telemetry sampled on the host while a load point runs (raw samples only).

Standard library only (Python 3.10); ships to the GPU host as
``ansible.module_utils.sglbench_hostlib.telemetry``. The load generator's module starts a
:class:`Sampler` before each point's warm-up and stops it right after the point's measured window:

- GPUs: one ``nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits -lms N -i <gpus>``
  process, read line by line by a thread (one row per GPU per sample, ``t`` from nvidia-smi's own
  timestamp);
- the server: a thread that every ``server_interval_ms`` reads ``/metrics`` (every ``sglang:`` gauge and
  counter, summed over label sets) and the load endpoint (its numeric fields, summed over DP ranks).

:func:`point_telemetry` assembles one point's document, the raw contract between host and controller
(documented in ``docs/records.md``). Nothing derived (energy, steady window) is computed here. A
sampling problem never raises: it goes to ``errors``.

The sampler runs in a forked process of its own (:class:`ForkedSampler`), so its threads never take the
load generator's interpreter lock and delay a send. Stopping costs the point almost nothing: the sampler
process is told the window's end and, on its own, waits at most about one GPU interval for a sample at or
after it (so the samples cover the window), terminates nvidia-smi, joins its threads with a short timeout
and hands its samples over; the module collects them when the campaign is done. Before the window
begins, the first samples must have arrived (nvidia-smi takes a moment to start; the warm-up usually
covers it, and the wait is only the rest).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import signal
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import forked
from . import sglang_facts as facts

SCHEMA = 1
# The nvidia-smi fields in query order, and the contract's GPU columns built from them.
GPU_FIELDS: tuple[str, ...] = (
    "timestamp",
    "index",
    "power.draw",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "clocks.sm",
    "temperature.gpu",
    "clocks_event_reasons.active",
)
THROTTLE_FIELD = "clocks_event_reasons.active"
LEGACY_THROTTLE_FIELD = "clocks_throttle_reasons.active"  # what older drivers call it
GPU_COLUMNS: tuple[str, ...] = (
    "t",
    "gpu",
    "power_w",
    "sm_util_pct",
    "mem_util_pct",
    "mem_used_mib",
    "sm_clock_mhz",
    "temp_c",
    "throttle_mask",
)
SERVER_COLUMNS: tuple[str, ...] = ("t", "source", "name", "value")
METRIC_PREFIX = "sglang:"
SMI_TIME_FORMAT = "%Y/%m/%d %H:%M:%S"  # nvidia-smi's timestamp, local time, then ".mmm"
SMI_RESOLUTION_S = 0.001  # its timestamps' resolution
# A timestamp further than this from when its line arrived is not trusted (a time zone mismatch).
SMI_CLOCK_TOLERANCE_S = 300.0
# Field values nvidia-smi prints when it has no number.
NOT_A_NUMBER = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[GPU is lost]", "")
# Histogram and summary sample suffixes: not gauges or counters.
_DISTRIBUTION_SUFFIXES = ("_bucket", "_sum", "_count", "_created")
# Load-endpoint fields that are not load (identity and clock fields).
_LOAD_SKIP = frozenset({"timestamp", "dp_rank", "version", "num_accelerators"})
MAX_ERRORS = 20
JOIN_TIMEOUT_S = 0.5  # longest wait for a thread or nvidia-smi to end at stop
# Longest wait for nvidia-smi's first samples before a window begins. It ends as soon as they arrive (under
# a second on a quiet host), so it only bounds a broken or starved nvidia-smi: a saturated host took over 3 s.
FIRST_SAMPLE_TIMEOUT_S = 15.0
HTTP_TIMEOUT_S = 2.0


class TelemetryConfigError(ValueError):
    """A malformed ``telemetry`` option."""


@dataclass(frozen=True)
class TelemetryConfig:
    """The module's ``telemetry`` option (all keys optional, default off)."""

    enabled: bool = False
    gpus: tuple[int, ...] = ()
    gpu_interval_ms: int = 200
    server_interval_ms: int = 1000
    metrics: bool = False
    load_endpoint: str | None = None
    nvidia_smi: str = "nvidia-smi"

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> TelemetryConfig:
        """Validate the option's dict; raise :class:`TelemetryConfigError` naming the bad key."""
        p = dict(params or {})
        unknown = sorted(set(p) - {f for f in cls.__dataclass_fields__})
        if unknown:
            raise TelemetryConfigError(f"telemetry: unknown key(s) {', '.join(unknown)}")
        try:
            gpus = tuple(int(g) for g in (p.get("gpus") or ()))
            gpu_ms = int(p.get("gpu_interval_ms") or 200)
            server_ms = int(p.get("server_interval_ms") or 1000)
        except (TypeError, ValueError) as exc:
            raise TelemetryConfigError(f"telemetry: {exc}") from None
        if any(g < 0 for g in gpus):
            raise TelemetryConfigError(f"telemetry.gpus: GPU indices are >= 0, got {list(gpus)}")
        if gpu_ms < 10 or server_ms < 10:
            raise TelemetryConfigError("telemetry: intervals are at least 10 ms")
        endpoint = p.get("load_endpoint") or None
        if endpoint is not None and not str(endpoint).startswith("/"):
            raise TelemetryConfigError(f"telemetry.load_endpoint {endpoint!r} must be a path (/v1/loads)")
        return cls(
            enabled=bool(p.get("enabled", False)),
            gpus=gpus,
            gpu_interval_ms=gpu_ms,
            server_interval_ms=server_ms,
            metrics=bool(p.get("metrics", False)),
            load_endpoint=str(endpoint) if endpoint is not None else None,
            nvidia_smi=str(p.get("nvidia_smi") or "nvidia-smi"),
        )


def nvidia_smi_command(cfg: TelemetryConfig, legacy: bool = False) -> list[str]:
    """The sampling command line (GPU rows only: the config's GPUs). ``legacy``: the throttle reasons
    under their name before drivers renamed them (``clocks_throttle_reasons.active``)."""
    fields = [LEGACY_THROTTLE_FIELD if legacy and f == THROTTLE_FIELD else f for f in GPU_FIELDS]
    return [
        cfg.nvidia_smi,
        "--query-gpu=" + ",".join(fields),
        "--format=csv,noheader,nounits",
        "-lms",
        str(cfg.gpu_interval_ms),
        "-i",
        ",".join(str(g) for g in cfg.gpus),
    ]


# ------------------------------------------------------------------------------------------ parsing


def parse_smi_timestamp(text: str) -> float | None:
    """nvidia-smi's ``YYYY/MM/DD HH:MM:SS.mmm`` (the host's local time) as epoch seconds; None if not one."""
    text = text.strip()
    whole, _, frac = text.partition(".")
    try:
        base = time.mktime(time.strptime(whole, SMI_TIME_FORMAT))
        return base + (float("0." + frac) if frac else 0.0)
    except (ValueError, OverflowError):
        return None


def parse_number(text: str) -> float | None:
    """A numeric field (``312.45``, ``312.45 W`` with units); None for ``[N/A]``/``[Not Supported]``."""
    text = text.strip()
    if text in NOT_A_NUMBER:
        return None
    try:
        value = float(text.split()[0])
    except (ValueError, IndexError):
        return None
    return value if math.isfinite(value) else None


def parse_throttle_mask(text: str) -> int | None:
    """``clocks_event_reasons.active`` (hex, ``0x0000000000000004``) as an integer; None if not one."""
    text = text.strip()
    if text in NOT_A_NUMBER:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def parse_gpu_line(line: str, received: float) -> tuple[list[Any], bool]:
    """One ``--query-gpu`` CSV line as a contract row and whether its ``t`` is nvidia-smi's own
    timestamp (else the time the line was received). Raises ValueError for a line that is not a sample
    (a message, a wrong field count, no GPU index)."""
    parts = [x.strip() for x in line.split(",")]
    if len(parts) != len(GPU_FIELDS):
        raise ValueError(f"not a sample ({len(parts)} fields, expected {len(GPU_FIELDS)}): {line[:160]!r}")
    index = parse_number(parts[1])
    if index is None or index != int(index):
        raise ValueError(f"no GPU index in {line[:160]!r}")
    t = parse_smi_timestamp(parts[0])
    from_smi = t is not None and abs(t - received) <= SMI_CLOCK_TOLERANCE_S
    row = [
        t if from_smi else received,
        int(index),
        parse_number(parts[2]),
        parse_number(parts[3]),
        parse_number(parts[4]),
        parse_number(parts[5]),
        parse_number(parts[6]),
        parse_number(parts[7]),
        parse_throttle_mask(parts[8]),
    ]
    return row, from_smi


def _sample_name(line: str) -> tuple[str, str] | None:
    """Split a Prometheus sample line into its metric name and the rest after the labels."""
    brace = line.find("{")
    space = line.find(" ")
    if brace == -1 or (space != -1 and space < brace):
        if space == -1:
            return None
        return line[:space], line[space + 1 :]
    i, quoted = brace + 1, False
    while i < len(line):
        ch = line[i]
        if quoted and ch == "\\":
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch == "}" and not quoted:
            return line[:brace], line[i + 1 :]
        i += 1
    return None


def parse_prometheus(text: str, prefix: str = METRIC_PREFIX) -> dict[str, float]:
    """Every gauge and counter sample of the ``prefix`` families of a Prometheus text exposition,
    summed over label sets, by name without the prefix (histogram and summary samples left out; a
    NaN or infinite value is skipped)."""
    kinds: dict[str, str] = {}
    out: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            bits = line.split()
            if len(bits) >= 4 and bits[1] == "TYPE":
                kinds[bits[2]] = bits[3]
            continue
        split = _sample_name(line)
        if split is None:
            continue
        name, rest = split
        if not name.startswith(prefix):
            continue
        if _distribution_sample(name, kinds):
            continue
        value = parse_number(rest.strip().split(" ")[0] if rest.strip() else "")
        if value is None:
            continue
        key = name[len(prefix) :]
        out[key] = out.get(key, 0.0) + value
    return out


def _distribution_sample(name: str, kinds: Mapping[str, str]) -> bool:
    """Whether ``name`` is a bucket, sum or count of a histogram or summary family, or a ``_created``
    timestamp (which prometheus_client adds beside counters)."""
    if kinds.get(name) in ("histogram", "summary"):
        return True
    for suffix in _DISTRIBUTION_SUFFIXES:
        if name.endswith(suffix):
            family = name[: -len(suffix)]
            if suffix in ("_bucket", "_created") or kinds.get(family) in ("histogram", "summary"):
                return True
    return False


def load_values(payload: Any) -> dict[str, float]:
    """The numeric fields of a load endpoint's answer, summed over its entries: ``/v1/loads`` answers
    ``{"loads": [one per DP rank]}``, ``/get_load`` a list. Nested objects give dotted names
    (``queues.waiting``); identity and clock fields (``dp_rank``, ``timestamp``) and lists are left out."""
    if isinstance(payload, Mapping) and isinstance(payload.get("loads"), list):
        entries: Iterable[Any] = payload["loads"]
    elif isinstance(payload, list):
        entries = payload
    else:
        entries = [payload]
    out: dict[str, float] = {}
    for entry in entries:
        if isinstance(entry, Mapping):
            _add_numbers(entry, "", out)
    return out


def _add_numbers(obj: Mapping[str, Any], prefix: str, out: dict[str, float]) -> None:
    for key, value in obj.items():
        if key in _LOAD_SKIP:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _add_numbers(value, name + ".", out)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = out.get(name, 0.0) + float(value)


def measured_window(t0_unix: float, records: Iterable[Any]) -> dict[str, float | None]:
    """The point's measured window on the host clock: first measured request sent to last measured
    response received (records carry ``sent_s``/``end_s`` relative to the point's start ``t0_unix``;
    warm-up records are left out). None bounds when nothing was sent or nothing ended."""
    sent: list[float] = []
    ended: list[float] = []
    for rec in records:
        if getattr(rec, "warmup", False):
            continue
        if getattr(rec, "sent_s", None) is not None:
            sent.append(rec.sent_s)
        if getattr(rec, "end_s", None) is not None:
            ended.append(rec.end_s)
    return {
        "start": t0_unix + min(sent) if sent else None,
        "end": t0_unix + max(ended) if ended else None,
    }


# ------------------------------------------------------------------------------------------ sampling


class _Errors:
    """Error messages, each once with a repeat count, at most :data:`MAX_ERRORS` distinct ones."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, message: str) -> None:
        with self._lock:
            if message in self._counts or len(self._counts) < MAX_ERRORS:
                self._counts[message] = self._counts.get(message, 0) + 1

    def as_list(self) -> list[str]:
        with self._lock:
            return [m if n == 1 else f"{m} (x{n})" for m, n in self._counts.items()]


@dataclass
class _Http:
    host: str
    port: int
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_url(cls, url: str, api_key: str | None) -> _Http:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"telemetry reads plain http:// servers, not {url!r}")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return cls(parts.hostname, parts.port or 80, headers)

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)
        try:
            conn.request("GET", path, headers=self.headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


class Sampler:
    """GPU and server sampling for one point: :meth:`start`, then :meth:`stop` (returns the raw parts)."""

    def __init__(
        self,
        cfg: TelemetryConfig,
        url: str,
        api_key: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.url = url
        self.api_key = api_key
        self.clock = clock
        self.errors = _Errors()
        self.gpu_rows: list[list[Any]] = []
        self.server_rows: list[list[Any]] = []
        self._t_sources: set[str] = set()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._threads: list[threading.Thread] = []
        self.started: float | None = None
        self.stopped: float | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start nvidia-smi (when there are GPUs) and the server scraper (when there is anything to
        scrape); returns at once."""
        self.started = self.clock()
        if self.cfg.gpus:
            self._start_gpu()
        if self.cfg.metrics or self.cfg.load_endpoint:
            try:
                client = _Http.from_url(self.url, self.api_key)
            except ValueError as exc:
                self.errors.add(f"server: {exc}")
            else:
                self._spawn(self._scrape_loop, client, name="telemetry-server")

    def stop(self, until: float | None = None) -> dict[str, Any]:
        """Stop sampling; with ``until``, first wait (about one GPU interval at most) for a GPU sample
        at or after it. Returns the ``sampling``/``gpu``/``server``/``errors`` parts of the document."""
        if until is not None and self._proc is not None:
            self._wait_for_gpu_sample(until)
        with self._cond:
            self._stop.set()
            proc = self._proc
            threads = list(self._threads)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=JOIN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=JOIN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.errors.add("nvidia-smi did not exit after SIGKILL")
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
            if thread.is_alive():
                self.errors.add(f"{thread.name} did not stop within {JOIN_TIMEOUT_S} s")
        self.stopped = self.clock()
        with self._cond:
            gpu_rows = sorted(self.gpu_rows, key=lambda r: (r[0], r[1]))
            server_rows = list(self.server_rows)
            sources = sorted(self._t_sources)
        gpu: dict[str, Any] = {"columns": list(GPU_COLUMNS), "rows": gpu_rows}
        if sources:
            gpu["t_source"] = sources[0] if len(sources) == 1 else "mixed"
        return {
            "sampling": {
                "gpus": list(self.cfg.gpus),
                "gpu_interval_ms": self.cfg.gpu_interval_ms,
                "server_interval_ms": self.cfg.server_interval_ms,
                "started": self.started,
                "stopped": self.stopped,
                "metrics": self.cfg.metrics,
                "load_endpoint": self.cfg.load_endpoint,
            },
            "gpu": gpu,
            "server": {"columns": list(SERVER_COLUMNS), "rows": server_rows},
            "errors": self.errors.as_list(),
        }

    def _spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._cond:
            self._threads.append(thread)
        thread.start()

    # -- GPUs ------------------------------------------------------------------------------------
    def _start_gpu(self, legacy: bool = False) -> None:
        cmd = nvidia_smi_command(self.cfg, legacy)
        with self._cond:  # never a process stop() does not see
            if self._stop.is_set():
                return
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    bufsize=1,
                    close_fds=True,
                )
            except OSError as exc:
                self.errors.add(f"gpu: cannot run {self.cfg.nvidia_smi}: {exc}")
                return
            self._spawn(self._read_gpu, self._proc, legacy, name="telemetry-gpu")

    def _read_gpu(self, proc: subprocess.Popen[str], legacy: bool) -> None:
        assert proc.stdout is not None
        other: list[str] = []
        for raw in proc.stdout:
            received = self.clock()
            line = raw.strip()
            if not line:
                continue
            try:
                row, from_smi = parse_gpu_line(line, received)
            except ValueError:
                other.append(line[:200])
                continue
            with self._cond:
                self.gpu_rows.append(row)
                self._t_sources.add("nvidia-smi" if from_smi else "receipt")
                self._cond.notify_all()
        rc = proc.wait()
        renamed = any(THROTTLE_FIELD in line and "valid field" in line for line in other)
        if renamed and not legacy and not self._stop.is_set():
            self._start_gpu(legacy=True)  # a driver from before the rename: ask by the old name
            return
        if not self._stop.is_set():
            said = "; ".join(other[-3:]) or "no output"
            self.errors.add(f"gpu: {self.cfg.nvidia_smi} exited with {rc} while sampling: {said}")
        elif other:
            self.errors.add(f"gpu: {len(other)} line(s) that are not samples, e.g. {other[0]!r}")

    def wait_first_samples(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until every GPU has a sample; said in ``errors`` when none came."""
        if self._proc is None:
            return
        deadline = time.monotonic() + timeout_s
        wanted = set(self.cfg.gpus)
        with self._cond:
            while not wanted <= {row[1] for row in self.gpu_rows}:
                left = deadline - time.monotonic()
                if left <= 0 or self._proc.poll() is not None:
                    if left <= 0:
                        self.errors.add(f"gpu: no sample of every GPU within {timeout_s} s of the start")
                    return
                self._cond.wait(min(left, 0.05))

    def _wait_for_gpu_sample(self, until: float) -> None:
        deadline = time.monotonic() + 1.5 * self.cfg.gpu_interval_ms / 1000.0 + 0.05
        wanted = set(self.cfg.gpus)
        with self._cond:
            while True:
                seen = {row[1] for row in self.gpu_rows if row[0] >= until - SMI_RESOLUTION_S}
                if wanted <= seen or (self._proc is not None and self._proc.poll() is not None):
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    # -- server ----------------------------------------------------------------------------------
    def _scrape_loop(self, client: _Http) -> None:
        interval = self.cfg.server_interval_ms / 1000.0
        while True:
            began = time.monotonic()
            if self.cfg.metrics:
                self._scrape(client, facts.METRICS, "metrics")
            if self.cfg.load_endpoint:
                self._scrape(client, self.cfg.load_endpoint, "load")
            if self._stop.wait(max(0.0, interval - (time.monotonic() - began))):
                return

    def _scrape(self, client: _Http, path: str, source: str) -> None:
        try:
            status, body = client.get(path)
        except (OSError, http.client.HTTPException) as exc:
            self.errors.add(f"{source}: GET {path} failed: {type(exc).__name__}: {exc}")
            return
        t = self.clock()
        if status != 200:
            self.errors.add(f"{source}: GET {path} answered HTTP {status}")
            return
        text = body.decode("utf-8", "replace")
        if source == "metrics":
            values = parse_prometheus(text)
        else:
            try:
                values = load_values(json.loads(text))
            except ValueError:
                self.errors.add(f"{source}: GET {path} did not answer JSON")
                return
        with self._cond:
            self.server_rows.extend([t, source, name, value] for name, value in sorted(values.items()))


def point_telemetry(
    parts: Mapping[str, Any], window: Mapping[str, float | None], host_started: float, host_ended: float
) -> dict[str, Any]:
    """One point's telemetry document (schema :data:`SCHEMA`) from a sampler's parts, the point's window
    and the module call's own start and end on the host clock."""
    return {
        "schema": SCHEMA,
        "clock": {"host_started": host_started, "host_ended": host_ended},
        "window": {"start": window.get("start"), "end": window.get("end")},
        **parts,
    }


def _empty_parts(cfg: TelemetryConfig, error: str) -> dict[str, Any]:
    """The parts of a sampling that produced nothing, saying why."""
    parts = Sampler(cfg, "").stop()
    parts["errors"] = [error]
    return parts


class ForkedSampler:
    """A :class:`Sampler` in a forked process of its own, driven over two pipes: its threads (reading
    nvidia-smi, parsing ``/metrics``) then never hold the load generator's interpreter lock, which would
    delay the load generator's sends. Same calls as :class:`Sampler`; a sampler process that dies or
    cannot be forked gives parts whose ``errors`` say so."""

    def __init__(self, cfg: TelemetryConfig, url: str, api_key: str | None = None) -> None:
        self.cfg = cfg
        self.url = url
        self.api_key = api_key
        self.clock = time.time
        self.pid: int | None = None
        self._ctl = self._res = -1
        self._error: str | None = None
        self._stopping = False

    def start(self) -> None:
        def run(ctl_fd: int, res_fd: int) -> int:  # the sampler process: serve the parent's commands
            _serve_sampler(Sampler(self.cfg, self.url, self.api_key), ctl_fd, res_fd)
            return 0

        try:
            self.pid, self._ctl, self._res = forked.fork_with_pipes(run)
        except OSError as exc:
            self._error = f"cannot fork the sampler process: {exc}"

    def _send(self, line: str) -> bool:
        try:
            os.write(self._ctl, (line + "\n").encode())
            return True
        except OSError:
            return False

    def wait_first_samples(self, timeout_s: float) -> None:
        if self.pid is not None and self._send(f"W {timeout_s}"):
            with contextlib.suppress(OSError):
                os.read(self._res, 1)

    def request_stop(self, until: float | None = None) -> None:
        """Tell the sampler process to stop (after its sample at or after ``until``) without waiting for
        it: :meth:`stop` collects the parts later."""
        if self.pid is not None and not self._stopping:
            self._stopping = self._send("S" + ("" if until is None else f" {until!r}"))

    def stop(self, until: float | None = None) -> dict[str, Any]:
        if self.pid is None:
            return _empty_parts(self.cfg, self._error or "the sampler process was not started")
        data = b""
        self.request_stop(until)
        if self._stopping:
            chunks = []
            while True:
                try:
                    chunk = os.read(self._res, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            data = b"".join(chunks)
        self._reap()
        try:
            parts: dict[str, Any] = json.loads(data.decode())
        except ValueError:
            return _empty_parts(self.cfg, "the sampler process ended without its samples")
        return parts

    def _reap(self) -> None:
        pid, self.pid = self.pid, None
        for fd in (self._ctl, self._res):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl = self._res = -1
        if pid is None:
            return
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            time.sleep(0.005)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _serve_sampler(sampler: Sampler, ctl: int, res: int) -> None:
    """The sampler process: start sampling, then answer ``W <timeout>`` (first samples there) and
    ``S [<until>]`` (stop, write the parts as JSON, end). A parent that goes away (end of input) stops it."""
    sampler.start()
    with os.fdopen(ctl, "rb") as commands, os.fdopen(res, "wb", buffering=0) as out:
        for raw in commands:
            word, _, arg = raw.decode().strip().partition(" ")
            if word == "W":
                sampler.wait_first_samples(float(arg or FIRST_SAMPLE_TIMEOUT_S))
                out.write(b"k")
            elif word == "S":
                parts = sampler.stop(until=float(arg) if arg else None)
                out.write(json.dumps(parts, allow_nan=False).encode())
                return
        sampler.stop()


class PointSampling:
    """The load generator's per-point hooks: a sampler (a :class:`ForkedSampler` where the platform can
    fork, else a :class:`Sampler`) started before each point's warm-up (:meth:`before_point`), its first
    samples awaited before the window (:meth:`before_window`), and stopped right after the window
    (:meth:`after_window`); the raw parts of every point, in order, in :attr:`points`."""

    def __init__(
        self, cfg: TelemetryConfig, url: str, api_key: str | None = None, fork: bool | None = None
    ) -> None:
        self.cfg = cfg
        self.url = url
        self.api_key = api_key
        self.fork = hasattr(os, "fork") if fork is None else fork
        self._points: list[dict[str, Any]] = []
        self._pending: list[tuple[ForkedSampler, float]] = []  # stopping in the background, and their cost
        self._current: Sampler | ForkedSampler | None = None
        self.stop_seconds: list[float] = []  # what each stop cost the point (wall seconds)
        self.wait_seconds: list[float] = []  # what waiting for the first samples cost each point
        self._cost = 0.0

    def before_point(self) -> None:
        self.close()
        began = time.monotonic()
        kind = ForkedSampler if self.fork else Sampler
        self._current = kind(self.cfg, self.url, self.api_key)
        self._current.start()
        self._cost = time.monotonic() - began

    def before_window(self) -> None:
        """The warm-up is over: make sure the GPU samples have begun before the window does (nvidia-smi
        takes a moment to start; the wait is only what the warm-up did not cover)."""
        if self._current is not None:
            began = time.monotonic()
            self._current.wait_first_samples(FIRST_SAMPLE_TIMEOUT_S)
            self.wait_seconds.append(time.monotonic() - began)
            self._cost += self.wait_seconds[-1]

    def after_window(self) -> None:
        """Stop sampling at the window's end. A sampler process takes its last sample (at or after the
        end) and stops on its own while the load generator goes on; :attr:`points` collects it."""
        sampler, self._current = self._current, None
        if sampler is None:
            return
        began = time.monotonic()
        until = sampler.clock()
        if isinstance(sampler, ForkedSampler):
            sampler.request_stop(until)
            self.stop_seconds.append(time.monotonic() - began)
            self._pending.append((sampler, self._cost + self.stop_seconds[-1]))
            return
        parts = sampler.stop(until=until)
        self.stop_seconds.append(time.monotonic() - began)
        self._add(parts, self._cost + self.stop_seconds[-1])

    def _add(self, parts: dict[str, Any], cost: float) -> None:
        # what sampling added to the point's wall time: starting, waiting for the first samples, stopping
        parts["sampling"]["overhead_s"] = round(cost, 4)
        self._points.append(parts)

    @property
    def sampled(self) -> int:
        """How many points have handed over their sampler so far (collected or still stopping)."""
        return len(self._points) + len(self._pending)

    def collect(self, count: int) -> list[dict[str, Any]]:
        """The raw parts of the first ``count`` points, in order, waiting only for the samplers those still
        need (a later point's sampler goes on stopping in the background)."""
        while len(self._points) < count and self._pending:
            sampler, cost = self._pending.pop(0)
            self._add(sampler.stop(), cost)
        return self._points[:count]

    @property
    def points(self) -> list[dict[str, Any]]:
        """The raw parts of every point so far, in order (collecting the samplers still stopping)."""
        pending, self._pending = self._pending, []
        for sampler, cost in pending:
            self._add(sampler.stop(), cost)
        return self._points

    def close(self) -> None:
        """Stop a sampler a failed point left running (its samples are dropped); the points' samplers
        that are still stopping stay to be collected."""
        sampler, self._current = self._current, None
        if sampler is not None:
            sampler.stop()
