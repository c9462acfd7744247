"""The stand-in's main process: SGLang's startup phases, worker processes, HTTP server, shutdown.

Run as ``python -m sglbench.sim <launch_server flags>`` or, on a sim host, as
``python -m sglang.launch_server <flags>`` through the ``sglang`` shim package.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from sglbench.hostlib import capacity_variants, sglang_args, sglang_facts
from sglbench.sim import api, faultplan, gpus, memory, modelinfo, power, release, textgen
from sglbench.sim.engine import Engine
from sglbench.sim.httpserver import Request, serve
from sglbench.sim.settings import SimSettings, SimSettingsError, load_settings, unknown_variables
from sglbench.sim.timing import COMPUTE_EFFICIENCY, TimingModel

GIB = float(1 << 30)
MIB_PER_GIB = 1024.0
SGLANG_SRC = "/usr/local/lib/python3.11/dist-packages/sglang"  # shown in traceback frames


class Terminated(Exception):
    """SIGTERM/SIGINT arrived during the (synchronous) startup phases."""


class StartupFailure(Exception):
    def __init__(
        self, exception_line: str, frames: Sequence[tuple[str, int, str, str]], *, in_scheduler: bool = True
    ) -> None:
        super().__init__(exception_line)
        self.exception_line = exception_line
        self.frames = frames
        self.in_scheduler = in_scheduler


class Log:
    """SGLang's log format: ``[%Y-%m-%d %H:%M:%S{ TPn}] message`` on stderr; TP tag only when tp > 1."""

    def __init__(self, tp_size: int, stream: Any = None) -> None:
        self.tp_size = tp_size
        self.stream = stream or sys.stderr

    def __call__(self, message: str, rank: int | None = None) -> None:
        tag = f" TP{rank}" if rank is not None and self.tp_size > 1 else ""
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.stream.write(f"[{stamp}{tag}] {message}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def ranks(self, make: Callable[[int], str]) -> None:
        for rank in range(self.tp_size):
            self(make(rank), rank)

    def raw(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text if text.endswith("\n") else text + "\n")
            self.stream.flush()


def _frames_worker() -> list[tuple[str, int, str, str]]:
    return [
        (
            f"{SGLANG_SRC}/srt/managers/scheduler.py",
            2990,
            "run_scheduler_process",
            "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
        ),
        (f"{SGLANG_SRC}/srt/managers/scheduler.py", 312, "__init__", "self.tp_worker = TpModelWorker("),
    ]


def _draft_in_static_pool(plan: Any) -> bool:
    """The plan's accounting counts the draft's weights and KV against --mem-fraction-static (loaded with the
    target), rather than loading the draft afterwards from what the target left."""
    return capacity_variants.variant(plan.accounting).draft_in_static_pool


def _frames_pool() -> list[tuple[str, int, str, str]]:
    return [
        *_frames_worker(),
        (f"{SGLANG_SRC}/srt/managers/tp_worker.py", 247, "__init__", "self._model_runner = ModelRunner("),
        (f"{SGLANG_SRC}/srt/model_executor/model_runner.py", 623, "initialize", "self.init_memory_pool("),
    ]


def _frames_load() -> list[tuple[str, int, str, str]]:
    runner = f"{SGLANG_SRC}/srt/model_executor/model_runner.py"
    return [*_frames_worker(), (runner, 1102, "load_model", "self.model = self.loader.load_model(")]


def _frames_config() -> list[tuple[str, int, str, str]]:
    return [
        ("<frozen runpy>", 198, "_run_module_as_main", ""),
        (f"{SGLANG_SRC}/launch_server.py", 11, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
        (
            f"{SGLANG_SRC}/srt/server_args.py",
            640,
            "__post_init__",
            "self._handle_model_specific_adjustments()",
        ),
    ]


# 0.5.23's SpeculativeAlgorithm members and its reserved alias (NEXTN, served as EAGLE)
SPEC_ALGORITHM_NAMES = (*sglang_facts.SPEC_ALGORITHMS, *sglang_facts.UNPLANNED_SPEC_ALGORITHMS)


def _check_speculative_args(args: Any) -> None:
    """ServerArgs' checks of the algorithm's name (spec_info.py) and of the draft window flags, for any
    algorithm (0.5.23's arg_groups/speculative_hook.py), run in ``__post_init__`` before anything is
    logged or loaded."""
    window = getattr(args, "speculative_draft_window_size", None)
    sink = getattr(args, "speculative_draft_sink_size", None)
    algorithm = getattr(args, "speculative_algorithm", None)
    message = None
    if algorithm and algorithm.upper() not in (*SPEC_ALGORITHM_NAMES, *sglang_args.SPEC_ALGORITHMS):
        message = f"Unknown speculative algorithm name: {algorithm}"  # SpeculativeAlgorithm.from_string
    elif window is not None and int(window) <= 0:
        message = f"--speculative-draft-window-size must be positive, got {int(window)}."
    elif sink is not None and int(sink) < 0:
        message = f"--speculative-draft-sink-size must be non-negative, got {int(sink)}."
    elif sink is not None and window is None:
        message = "--speculative-draft-sink-size requires --speculative-draft-window-size."
    if message is not None:
        frames = [
            *_frames_config()[:-1],
            (
                f"{SGLANG_SRC}/srt/arg_groups/speculative_hook.py",
                205,
                "handle_speculative_decoding",
                "raise ValueError(",
            ),
        ]
        raise StartupFailure(f"ValueError: {message}", frames, in_scheduler=False)


def _speculative_resolutions(fields: dict[str, Any]) -> dict[str, Any]:
    """What 0.5.23's speculative hook (arg_groups/speculative_hook.py) resolves beyond the draft token
    count, shown in /server_info: the draft's revision, its MoE runner (the target's), no overlap
    schedule on the CPU, and NGRAM's own topk (the BFS breadth), steps (draft tokens // topk), no mixed
    chunk."""
    out: dict[str, Any] = {}
    if fields.get("speculative_draft_model_path") and fields.get("speculative_draft_model_revision") is None:
        out["speculative_draft_model_revision"] = "main"
    if fields.get("speculative_moe_runner_backend") is None:
        runner = str(fields.get("moe_runner_backend") or "auto")
        out["speculative_moe_runner_backend"] = (
            "flashinfer_trtllm"
            if runner == "flashinfer_megamoe"
            else "auto"
            if runner.startswith("lora_")
            else runner
        )
    if fields.get("device") == "cpu":
        out["disable_overlap_schedule"] = True
    if str(fields.get("speculative_algorithm") or "").upper() == "NGRAM":
        topk = int(fields.get("speculative_ngram_max_bfs_breadth") or 10)
        out["speculative_eagle_topk"] = topk
        out["enable_mixed_chunk"] = False
        if fields.get("speculative_num_steps") is None:
            out["speculative_num_steps"] = int(fields.get("speculative_num_draft_tokens") or 12) // topk
    return out


def _frames_worker_assert() -> list[tuple[str, int, str, str]]:
    check = 'assert self.max_running_requests > 0, "max_running_request is zero"'
    return [*_frames_worker(), (f"{SGLANG_SRC}/srt/managers/tp_worker.py", 296, "__init__", check)]


def _load_failure(
    fail_load: str, total_gib: float, pre: float, overhead: float, weights: float
) -> StartupFailure:
    """What a weight load that fails half-way raises: a corrupt file, or out of GPU memory."""
    if fail_load == "corrupt":
        return StartupFailure(
            "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
            _frames_load(),
        )
    free_mib = max(0.0, pre - weights / 2) * 1024
    return StartupFailure(
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total "
        f"capacity of {total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. Including non-PyTorch "
        f"memory, this process has {overhead + weights / 2:.2f} GiB memory in use.",
        _frames_load(),
    )


def _capture_bs(cgmb: int, max_running: int) -> list[int]:
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 513, 16)]
    limit = max(1, min(cgmb, max_running)) if max_running > 0 else cgmb
    return [b for b in sizes if b <= limit] or [1]


# Flags outside the capacity planner's fields that the stand-in itself honours (HTTP server, API,
# logging, GPU placement). Every other flag the release accepts and the planner does not model is
# accepted and ignored (one startup line names them).
STAND_IN_FIELDS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 30000,
    "api_key": None,
    "enable_metrics": False,
    "served_model_name": None,
    "tokenizer_path": None,
    "decode_log_interval": 40,
    "skip_server_warmup": False,
    "stream_interval": 1,
    "incremental_streaming_output": False,
    "enable_cache_report": False,
    "max_queued_requests": None,
    "base_gpu_id": 0,
}


def _stand_in_view(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the fields the stand-in reads but the release leaves unset (``None``) or lacks."""
    for name, default in STAND_IN_FIELDS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, default)
    return args


def release_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed flags under the release's own field names (what its ServerArgs holds): no
    planner-only aliases, no sglbench bookkeeping."""
    fields = getattr(args, "_sglbench_spelling", None)
    if not fields:
        return {k: v for k, v in vars(args).items() if not k.startswith("_")}
    return {name: getattr(args, name, None) for name in fields}


def release_field(args: argparse.Namespace, planner_name: str) -> str:
    """The release's field for a planner field (``cuda_graph_max_bs`` -> ``cuda_graph_max_bs_decode`` on
    releases that renamed it)."""
    fields = getattr(args, "_sglbench_spelling", None) or {}
    for name in sglang_args.PLANNER_FIELDS.get(planner_name, ((planner_name,), None))[0]:
        if name in fields:
            return name
    return planner_name


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """Given flags the release accepts that the stand-in does not simulate: everything the capacity
    planner does not model (``capacity_effect``) and the stand-in does not implement itself."""
    modelled = set(sglang_args.capacity_effect(args)["modelled"])
    out: list[str] = []
    for given in getattr(args, "_sglbench_given", []):
        if given.flag in modelled or given.dest in STAND_IN_FIELDS or given.flag in out:
            continue
        out.append(given.flag)
    return out


def _fmt_args(args: argparse.Namespace) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(release_fields(args).items()))


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _access_logger(log: Log) -> Callable[[Request, int], None]:
    """uvicorn's access log line for one answered request."""

    def access_log(request: Request, status: int) -> None:
        reason = _REASONS.get(status, "")
        log(f'INFO:     {request.client} - "{request.method} {request.target} HTTP/1.1" {status} {reason}')

    return access_log


@dataclass
class _Boot:
    """What the startup phases share: the plan and the memory per rank taken (``used``) and left
    (``avail``) so far, in GiB, as their log lines show it."""

    spec: str | None
    config: dict[str, Any]
    draft_config: dict[str, Any] | None
    facts: modelinfo.ModelFacts
    kind: gpus.GpuKind
    plan: memory.MemoryPlan
    total_gib: float
    pre: float  # free before the weights load
    overhead: float  # the CUDA context
    avail: float = 0.0
    used: float = 0.0
    load_s: float = 0.0  # the target's weight load, in simulated seconds

    @property
    def draft_weights_gib(self) -> float:
        return self.plan.draft_weights_gib if self.spec else 0.0

    @property
    def capture(self) -> list[int]:
        return _capture_bs(self.plan.cuda_graph_max_bs, self.plan.max_running_requests)

    def take(self, gib: float) -> None:
        """A phase took ``gib`` per rank."""
        self.avail -= gib
        self.used += gib

    def kv_line(self, k: float, v: float) -> str:
        dtype_part = f"dtype: {self.plan.kv_dtype}, " if self.plan.accounting != "A" else ""
        sizes = f"K size: {k:.2f} GB, V size: {v:.2f} GB"
        return f"KV Cache is allocated. {dtype_part}#tokens: {self.plan.max_total_num_tokens}, {sizes}"


class SimServer:
    def __init__(self, args: argparse.Namespace, settings: SimSettings, log: Log | None = None) -> None:
        self.args = args
        self.settings = settings
        self.log = log or Log(args.tp_size)
        self.workers: dict[int, int] = {}  # rank -> pid
        self.detokenizer: int | None = None
        self.argv: list[str] = []  # the launch flags (0.5.23's /server_info launch_command)
        self.worker_mib: dict[int, int] = {}
        self.gpu_ids: list[int] = []
        self.meter: power.Meter | None = None  # the GPUs' energy account, published for nvidia-smi
        self.process_name = os.path.basename(sys.executable or "python3")
        self._stopping = False
        self._main_pid = os.getpid()
        # what was checked against the real 0.5.23 (log lines, shutdown); older releases keep their own
        self.follows_contract = release.at_least(settings.sglang_version)
        self.startup_available_gib = 0.0
        self.capture_bs: list[int] = []

    # ------------------------------------------------------------------ helpers
    def sleep(self, sim_seconds: float) -> None:
        delay = self.settings.scaled(sim_seconds)
        end = time.monotonic() + delay
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))

    def _fork_child(self, name: str, *, die_with_parent: bool) -> int:
        pid = os.fork()
        if pid == 0:  # child: an SGLang-like subprocess that just holds its (registered) GPU memory
            code = 0
            try:
                _worker_main(self._main_pid, self.settings.orphan_ttl_seconds, name, die_with_parent)
            except BaseException:
                code = 1
            os._exit(code)
        return pid

    def _spawn_workers(self) -> None:
        """SGLang's subprocesses: one scheduler per TP rank (``sglang::scheduler`` or
        ``sglang::scheduler_TP{n}``) and a detokenizer (``sglang::detokenizer``). Like SGLang's
        (``kill_itself_when_parent_died``: PR_SET_PDEATHSIG), they die with the main process, even
        when it is SIGKILLed; only the orphan fault keeps rank 0 alive."""
        tp = self.args.tp_size
        for rank in range(tp):
            name = "sglang::scheduler" if tp == 1 else f"sglang::scheduler_TP{rank}"
            keep = self.settings.orphan_worker and rank == 0
            self.workers[rank] = self._fork_child(name, die_with_parent=not keep)
        self.detokenizer = self._fork_child("sglang::detokenizer", die_with_parent=True)
        self._hold(lambda rank: 0.0)

    def _hold(self, gib_for_rank: Callable[[int], float]) -> None:
        """Record in the GPU registry how much memory each worker now holds."""
        for rank, pid in self.workers.items():
            mib = round(gib_for_rank(rank) * MIB_PER_GIB)
            self.worker_mib[rank] = mib
            with contextlib.suppress(OSError):
                gpus.register(
                    self.settings.state_dir,
                    pid,
                    {self.gpu_ids[rank]: mib},
                    self.process_name,
                    f"sglang::scheduler_TP{rank}",
                )

    def kill_workers(self, keep: int | None = None) -> None:
        if self.detokenizer is not None:
            with contextlib.suppress(OSError):
                os.kill(self.detokenizer, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.detokenizer, 0)
            self.detokenizer = None
        for rank, pid in list(self.workers.items()):
            if rank == keep:
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
            gpus.unregister(self.settings.state_dir, pid)
            del self.workers[rank]

    def fail(self, failure: StartupFailure) -> int:
        if failure.in_scheduler:
            lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
        else:
            lines = ["Traceback (most recent call last):"]
        for path, line, func, code in failure.frames:
            lines.append(f'  File "{path}", line {line}, in {func}')
            if code:
                lines.append(f"    {code}")
        lines.append(failure.exception_line)
        if failure.in_scheduler:
            self.log("\n".join(lines) + "\n", 0)
            self.log("Received sigquit from a child process. It usually means the child failed.")
        else:
            self.log.raw("\n".join(lines))
        self.kill_workers()
        return 1

    # ------------------------------------------------------------------ startup
    def run(self) -> int:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, frame: object) -> None:
            self._stopping = True
            raise Terminated()

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            return self._run()
        except Terminated:
            self.kill_workers(keep=0 if self.settings.orphan_worker else None)
            return 0
        except StartupFailure as failure:
            return self.fail(failure)
        finally:
            if self.meter is not None:
                self.meter.close()
            if self.detokenizer is not None:
                with contextlib.suppress(OSError):
                    os.kill(self.detokenizer, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.waitpid(self.detokenizer, 0)
            for rank, pid in list(self.workers.items()):
                if not (self.settings.orphan_worker and rank == 0 and self._stopping):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                    with contextlib.suppress(OSError):
                        os.waitpid(pid, 0)
                    gpus.unregister(self.settings.state_dir, pid)

    def _run(self) -> int:
        boot = self._prepare()
        started = time.monotonic()
        self._spawn_workers()
        self._init_parallel(boot)
        self._load_target_weights(boot)
        plan = boot.plan
        if boot.spec and boot.draft_config is not None and _draft_in_static_pool(plan):
            self._load_draft_weights(boot)
        if plan.failure_stage == "pool":
            raise StartupFailure(str(plan.failure_message), _frames_pool())
        self._allocate_target_pools(boot)
        graph_total = plan.cuda_graph_gib
        target_graph = graph_total / 2 if boot.spec else graph_total
        self._capture_graphs(boot, target_graph)
        if plan.failure_stage == "worker":
            raise StartupFailure(str(plan.failure_message), _frames_worker_assert())
        if boot.spec and boot.draft_config is not None:
            # V1-V3: the draft worker after the target is sized, from the slack
            if not _draft_in_static_pool(plan):
                self._start_draft_worker(boot)
            self._capture_graphs(boot, graph_total - target_graph)
        if boot.spec and sglang_facts.spec_algorithm(boot.spec).family == sglang_facts.FAMILY_DFLASH:
            self._log_dflash(boot)
        self._log_capacity(boot)
        startup_s = time.monotonic() - started
        self.startup_available_gib = boot.avail
        self.capture_bs = [] if self.args.disable_cuda_graph else boot.capture
        if self.follows_contract:
            self._log_startup_timings(boot, startup_s)
        return self._serve(plan, boot.facts, boot.kind, startup_s, boot.load_s)

    def _prepare(self) -> _Boot:
        """Announce the flags, read the model configs, find the GPUs and plan the memory: everything
        before the first worker starts."""
        args, settings, log = self.args, self.settings, self.log
        _check_speculative_args(args)
        log(f"server_args=ServerArgs({_fmt_args(args)})")
        accounting = memory.accounting_for(settings.sglang_version, settings.accounting)
        version, flags_release = settings.sglang_version, settings.sglang_release
        impersonated = release.Impersonation(version, flags_release, version == flags_release)
        log(
            f"sglbench sim: SGLang stand-in (simulated, no GPU) impersonating {impersonated.describe()}, "
            f"memory accounting {accounting}"
        )
        ignored = ignored_flags(args)
        if ignored:
            log(
                "sglbench sim: accepted and ignored by the stand-in (valid for SGLang "
                f"{settings.sglang_release}, not simulated): {' '.join(ignored)}"
            )
        config, draft_config = self._model_configs()
        facts = modelinfo.facts(config)
        try:
            kind = gpus.gpu_kind(settings)
            self.gpu_ids = gpus.assigned_gpus(
                args.tp_size, settings.gpu_count, os.environ.get("CUDA_VISIBLE_DEVICES"), args.base_gpu_id
            )
        except gpus.GpuConfigError as exc:
            raise StartupFailure(str(exc), _frames_worker()) from None
        total_gib = kind.memory_mib / MIB_PER_GIB
        others = gpus.used_mib_by_gpu(settings.state_dir, settings.gpu_count)
        others_gib = max(others.get(i, 0) for i in self.gpu_ids) / MIB_PER_GIB
        overhead = memory.context_overhead_gib(args.tp_size)
        pre = total_gib - others_gib - overhead
        try:
            plan = memory.plan_memory(
                args,
                config,
                draft_config,
                gpu_mem_gib=total_gib,
                free_gib=max(pre, 0.01),
                weights_gib=settings.weights_gib,
                draft_weights_gib=settings.draft_weights_gib,
                accounting=accounting,
                model_dir=args.model_path,
                draft_model_dir=args.speculative_draft_model_path,
            )
        except ValueError as exc:
            raise StartupFailure(f"ValueError: {exc}", _frames_config(), in_scheduler=False) from None
        if plan.failure_stage == "config":
            raise StartupFailure(str(plan.failure_message), _frames_config(), in_scheduler=False)
        return _Boot(
            args.speculative_algorithm, config, draft_config, facts, kind, plan, total_gib, pre, overhead
        )

    def _model_configs(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The target's and the draft model's ``config.json`` (a bad one fails before the workers)."""
        args = self.args
        try:
            config = modelinfo.load_config(args.model_path)
            draft_config = (
                modelinfo.load_config(args.speculative_draft_model_path)
                if args.speculative_draft_model_path
                else None
            )
        except modelinfo.ModelConfigError as exc:
            raise StartupFailure(str(exc), _frames_config(), in_scheduler=False) from None
        return config, draft_config

    def _init_parallel(self, boot: _Boot) -> None:
        """The distributed init of every rank, which takes the CUDA context's memory."""
        settings, log, overhead = self.settings, self.log, boot.overhead
        init_s = settings.scaled(settings.init_seconds)
        if self.follows_contract:  # 0.5.23 (srt/distributed/bootstrap.py)
            log.ranks(lambda r: "Init parallel begin.")
            self.sleep(settings.init_seconds)
            log.ranks(lambda r: f"Init parallel ends. elapsed={init_s:.2f} s")
            log.ranks(lambda r: f"Memory baseline taken. mem usage={overhead:.2f} GB")
        else:
            log.ranks(lambda r: "Init torch distributed begin.")
            self.sleep(settings.init_seconds)
            log.ranks(
                lambda r: f"Init torch distributed ends. elapsed={init_s:.2f} s, mem usage={overhead:.2f} GB"
            )
        self._hold(lambda r: overhead)
        if settings.slow_start_seconds:
            self.sleep(settings.slow_start_seconds)

    def _load_target_weights(self, boot: _Boot) -> None:
        """Load the target's weights, or fail half-way (``fail_load``, or weights larger than free)."""
        settings, log, plan, pre = self.settings, self.log, boot.plan, boot.pre
        weights = plan.weights_gib
        load_s = weights / settings.load_gibps
        log.ranks(lambda r: f"Load weight begin. avail mem={pre:.2f} GB")
        if settings.fail_load or weights > pre:
            self.sleep(load_s / 2)
            self._hold(lambda r: boot.overhead + min(weights, max(pre, 0.0)) / 2)
            raise _load_failure(settings.fail_load, boot.total_gib, pre, boot.overhead, weights)
        self.sleep(load_s)
        boot.load_s = load_s
        boot.avail = pre - weights
        quant = (
            (boot.config.get("quantization_config") or {}).get("quant_method")
            if isinstance(boot.config.get("quantization_config"), dict)
            else None
        )
        quant_str = f"quant={quant}, " if quant else ""
        log.ranks(
            lambda r: (
                f"Load weight end. elapsed={settings.scaled(load_s):.2f} s, type={plan.model_class}, "
                f"{quant_str}avail mem={boot.avail:.2f} GB, mem usage={weights:.2f} GB."
            )
        )
        boot.used = boot.overhead + weights
        self._hold(lambda r: boot.used)

    def _load_draft_weights(self, boot: _Boot) -> None:
        settings, log = self.settings, self.log
        draft_w = boot.draft_weights_gib
        dload = draft_w / settings.load_gibps
        log.ranks(lambda r: f"Load weight begin. avail mem={boot.avail:.2f} GB")
        self.sleep(dload)
        boot.take(draft_w)
        log.ranks(
            lambda r: (
                f"Load weight end. elapsed={settings.scaled(dload):.2f} s, "
                f"type={modelinfo.facts(boot.draft_config or {}).architecture}, "
                f"avail mem={boot.avail:.2f} GB, mem usage={draft_w:.2f} GB."
            )
        )
        self._hold(lambda r: boot.used)

    def _allocate_target_pools(self, boot: _Boot) -> None:
        """The target's Mamba and KV pools (and, with accounting C, the draft's KV pool beside them)."""
        log, plan, spec = self.log, boot.plan, boot.spec
        if not self.follows_contract:  # gone in 0.5.23
            log.ranks(lambda r: f"Using KV cache dtype: {plan.kv_dtype}")
        if plan.mamba_slots is not None:
            spec_part = ""
            if spec:
                spec_part = (
                    f"intermediate_ssm_state_cache size: {plan.spec_intermediate_ssm_gib:.2f}GB "
                    f"intermediate_conv_window_cache size: {plan.spec_intermediate_conv_gib:.2f}GB "
                )
            log.ranks(
                lambda r: (
                    f"Mamba Cache is allocated. max_mamba_cache_size: {plan.mamba_slots}, "
                    f"conv_state size: {plan.mamba_conv_gib:.2f}GB, "
                    f"ssm_state size: {plan.mamba_ssm_gib:.2f}GB {spec_part}"
                )
            )
        log.ranks(lambda r: boot.kv_line(plan.k_size_gib, plan.v_size_gib))
        if spec and _draft_in_static_pool(plan) and boot.draft_config is not None:
            log.ranks(lambda r: boot.kv_line(plan.draft_k_size_gib, plan.draft_v_size_gib))
        if plan.failure_stage == "resolve":
            raise StartupFailure(str(plan.failure_message), _frames_pool())
        if plan.accounting != "A" and not self.follows_contract:  # not printed by 0.5.23
            log.ranks(
                lambda r: (
                    "Max concurrent requests (per dp worker) from the finalized token capacity: "
                    f"max_num_reqs={plan.max_running_requests}."
                )
            )
        pool_used = (
            plan.avail_after_weights_gib
            - (boot.draft_weights_gib if _draft_in_static_pool(plan) else 0.0)
            - plan.pool_end_avail_gib
        )
        boot.take(pool_used)
        log.ranks(lambda r: f"Memory pool end. avail mem={boot.avail:.2f} GB")
        self._hold(lambda r: boot.used)

    def _capture_graphs(self, boot: _Boot, gib: float) -> None:
        if self.args.disable_cuda_graph:
            return
        settings, log = self.settings, self.log
        begin = "Capture cuda graph begin. This can take up to several minutes."
        log.ranks(lambda r: f"{begin} avail mem={boot.avail:.2f} GB")
        log.ranks(lambda r: f"Capture cuda graph bs {boot.capture}")
        self.sleep(settings.graph_seconds)
        boot.take(gib)
        log.ranks(
            lambda r: (
                f"Capture cuda graph end. Time elapsed: {settings.scaled(settings.graph_seconds):.2f} s. "
                f"mem usage={gib:.2f} GB. avail mem={boot.avail:.2f} GB."
            )
        )
        self._hold(lambda r: boot.used)

    def _start_draft_worker(self, boot: _Boot) -> None:
        """Accounting other than C: the draft's weights and KV pool, from what the target left."""
        log, plan = self.log, boot.plan
        self._load_draft_weights(boot)
        if not self.follows_contract:
            log.ranks(lambda r: f"Using KV cache dtype: {plan.kv_dtype}")
        log.ranks(lambda r: boot.kv_line(plan.draft_k_size_gib, plan.draft_v_size_gib))
        dkv = plan.draft_k_size_gib + plan.draft_v_size_gib
        boot.take(dkv)
        log.ranks(lambda r: f"Memory pool end. avail mem={boot.avail:.2f} GB")
        self._hold(lambda r: boot.used)

    def _log_dflash(self, boot: _Boot) -> None:
        """The DFLASH family's draft runner (and DDTREE's tree worker) announce themselves."""
        args, log, spec = self.args, self.log, boot.spec
        block = boot.plan.num_draft_tokens
        mask_id = ((boot.draft_config or {}).get("dflash_config") or {}).get("mask_token_id")
        log.ranks(
            lambda r: (
                f"Initialized DFLASH draft runner. attention_backend=flashinfer, "
                f"model={args.speculative_draft_model_path}, block_size={block}, "
                f"draft_window_size={args.speculative_draft_window_size}, compact_cache=False"
            )
        )
        log.ranks(
            lambda r: (
                f"DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id={mask_id}, "
                "mask_token_id_override=None"
            )
        )
        if spec == "DDTREE":
            budget = block - 1
            log.ranks(
                lambda r: (
                    f"Initialized DDTree worker. block_size={block}, tree_budget={budget}, "
                    f"max_tree_nodes={budget + 1}"
                )
            )

    def _log_capacity(self, boot: _Boot) -> None:
        """Rank 0's summary of what the pools hold (and 0.5.23's warning when one request cannot fit)."""
        log, plan, tokens = self.log, boot.plan, boot.plan.max_total_num_tokens
        if self.follows_contract and tokens < plan.context_len:  # 0.5.23 tp_worker.py
            log(
                f"KV pool holds {tokens} tokens, fewer than --context-length {plan.context_len}. One "
                "full-length request cannot fit, so long requests will be refused or truncated at serving "
                "time. Lower --context-length, raise --mem-fraction-static, or free memory taken before the "
                "pool is sized.",
                0,
            )
        log(
            f"max_total_num_tokens={tokens}, chunked_prefill_size={plan.chunked_prefill_size}, "
            f"max_prefill_tokens={plan.max_prefill_tokens}, "
            f"max_running_requests={plan.max_running_requests}, "
            f"context_len={plan.context_len}, available_gpu_mem={boot.avail:.2f} GB",
            0,
        )

    def _log_startup_timings(self, boot: _Boot, startup_s: float) -> None:
        """0.5.23's observability/startup_time.py line."""
        args, settings = self.args, self.settings
        graph_s = 0.0 if args.disable_cuda_graph else settings.scaled(settings.graph_seconds)
        phases = ", ".join(f"{ph}={graph_s if ph == 'decode' else 0.0:.2f}" for ph in api.GRAPH_PHASES)
        self.log(
            f"Engine startup timings (s): load_weight={settings.scaled(boot.load_s):.2f}, "
            f"kv_cache_allocation=0.00, scheduler_e2e={startup_s:.2f}, cuda_graph={{{phases}}}, "
            f"tokenizer_e2e={startup_s:.2f}"
        )

    # ------------------------------------------------------------------ serving
    def _timing(self, plan: memory.MemoryPlan, kind: gpus.GpuKind) -> TimingModel:
        args = self.args
        spec = args.speculative_algorithm
        passes = 0
        if spec and sglang_facts.spec_algorithm(spec).family != sglang_facts.FAMILY_EAGLE:
            passes = 1  # one draft pass per verify step (block drafters; NGRAM's lookup)
        elif spec:
            passes = args.speculative_num_steps or 3
        state = 0.0
        if plan.mamba_slots is not None:
            state = float(plan.mamba_per_req_bytes) or (plan.mamba_conv_gib + plan.mamba_ssm_gib) * GIB / max(
                1, plan.mamba_slots + 1
            )
        return TimingModel(
            weights_bytes=plan.weights_gib * GIB,
            bandwidth_bps=kind.bandwidth_gbps * 1e9,
            flops=kind.bf16_tflops * 1e12 * COMPUTE_EFFICIENCY,
            kv_bytes_per_token=plan.kv_bytes_per_token,
            state_bytes_per_request=state,
            num_layers=int(plan.raw.get("num_layers") or 64),
            tp_size=args.tp_size,
            draft_weights_bytes=plan.draft_weights_gib * GIB if spec else 0.0,
            draft_passes=passes,
            num_draft_tokens=max(1, plan.num_draft_tokens) if spec else 1,
            prefill_tokens_per_s=self.settings.prefill_tokens_per_s,
        )

    def _accept_length(self, plan: memory.MemoryPlan) -> float | None:
        """Mean tokens per verify step of a speculative config (None without speculation)."""
        spec = self.args.speculative_algorithm
        if not spec:
            return None
        mean = self.settings.accept_length or sglang_facts.sim_accept_length(spec)
        return min(mean, float(max(1, plan.num_draft_tokens)))

    def serving_model(self) -> tuple[memory.MemoryPlan, TimingModel, float | None]:
        """What this launch would serve with, computed without starting anything: the memory plan (request
        slots, KV pool), the timing model and the mean accept length. :mod:`sglbench.sim.truth` reads it;
        raises :class:`StartupFailure` when the launch would not start."""
        boot = self._prepare()
        if not boot.plan.fits:
            raise StartupFailure(str(boot.plan.failure_message), [])
        return boot.plan, self._timing(boot.plan, boot.kind), self._accept_length(boot.plan)

    def _serve(
        self,
        plan: memory.MemoryPlan,
        facts: modelinfo.ModelFacts,
        kind: gpus.GpuKind,
        startup_s: float,
        load_s: float,
    ) -> int:
        args = self.args
        spec_cfg = None
        accept = self._accept_length(plan)
        if args.speculative_algorithm and accept is not None:
            spec_cfg = api.SpecConfig(
                args.speculative_algorithm,
                max(1, plan.num_draft_tokens),
                args.speculative_num_steps or 1,
                args.speculative_eagle_topk or 1,
                accept,
            )
        server_args = release_fields(args)
        server_args.pop("config", None)  # --config is read before ServerArgs exists: no field of it
        server_args.update(
            {
                "mem_fraction_static": plan.mem_fraction_static,
                "chunked_prefill_size": plan.chunked_prefill_size,
                "max_prefill_tokens": plan.max_prefill_tokens,
                release_field(args, "cuda_graph_max_bs"): plan.cuda_graph_max_bs,
                "page_size": plan.page_size,
                "served_model_name": args.served_model_name or args.model_path,
                "tokenizer_path": args.tokenizer_path or args.model_path,
            }
        )
        if self.follows_contract:
            # 0.5.23 keeps the flags as given (cuda_graph_max_bs_decode None unless set) and puts the
            # resolved CUDA-graph settings into cuda_graph_config (what the CPU engine shows, with its
            # backends "disabled"; on a GPU the stand-in's capture sizes)
            cgmb = release_field(args, "cuda_graph_max_bs")
            server_args[cgmb] = release_fields(args).get(cgmb)
            backend = "disabled" if args.disable_cuda_graph else "full"
            phase = {
                "tc_compiler": "eager",
                "max_context_size": None,
                "full_prefill_max_req": None,
                "full_prefill_prefix_chunk_tokens": None,
                "max_seq_len": None,
            }
            server_args["cuda_graph_config"] = {
                "decode": {
                    "backend": backend,
                    "max_bs": plan.cuda_graph_max_bs,
                    "bs": self.capture_bs,
                    **phase,
                },
                "prefill": {"backend": "disabled", "max_bs": plan.chunked_prefill_size, "bs": [], **phase},
            }
        if args.speculative_algorithm:
            if args.max_running_requests is None:
                server_args["max_running_requests"] = 48
            server_args["speculative_num_draft_tokens"] = plan.num_draft_tokens
            server_args.update(_speculative_resolutions(server_args))
        return asyncio.run(self._amain(plan, facts, kind, spec_cfg, server_args, startup_s, load_s))

    async def _amain(
        self,
        plan: memory.MemoryPlan,
        facts: modelinfo.ModelFacts,
        kind: gpus.GpuKind,
        spec_cfg: api.SpecConfig | None,
        server_args: dict[str, Any],
        startup_s: float,
        load_s: float,
    ) -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        stop_signal: list[int] = []  # the first SIGTERM/SIGINT
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_stop, sig, stop, stop_signal)
        engine = self._engine(plan, kind)
        self.meter = power.Meter(
            power.figures(kind), self.gpu_ids, self.settings.state_dir, ledger=self.settings.power_ledger
        )
        engine.meter = self.meter
        app = api.SimApp(
            self.args,
            self.settings,
            plan,
            facts,
            engine,
            spec_cfg,
            server_args,
            self.log,
            self._crash_soon(loop),
        )
        app.gpu_name = kind.smi_name
        app.gpu_ids = list(self.gpu_ids)
        app.startup_seconds = startup_s
        app.load_weights_seconds = self.settings.scaled(load_s)
        app.startup_available_gib = self.startup_available_gib
        app.capture_bs = list(self.capture_bs)
        app.launch_argv = list(self.argv)
        engine.start()
        server = await self._bind(app)
        if server is None:
            return 1
        warm = loop.create_task(self._warmup(app, facts))
        served_at = time.monotonic()
        await stop.wait()
        sigterm = bool(stop_signal) and stop_signal[0] == signal.SIGTERM
        if sigterm:
            await self._drain(engine, served_at)
        warm.cancel()
        self._shut_down(server, sigterm)
        return 0

    def _request_stop(self, signum: int, stop: asyncio.Event, stop_signal: list[int]) -> None:
        self._stopping = True
        if not stop_signal:
            stop_signal.append(signum)
            if signum == signal.SIGTERM:  # SGLang's SignalHandler.sigterm_handler
                self.log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        stop.set()

    def _engine(self, plan: memory.MemoryPlan, kind: gpus.GpuKind) -> Engine:
        args, log = self.args, self.log
        return Engine(
            self._timing(plan, kind),
            max_running=plan.max_running_requests,
            max_total_tokens=plan.max_total_num_tokens,
            time_scale=self.settings.time_scale,
            decode_log_interval=args.decode_log_interval,
            log=lambda m: log(m, 0),
            hybrid=plan.mamba_slots is not None,
            cuda_graph=not args.disable_cuda_graph,
            cuda_graph_max_bs=plan.cuda_graph_max_bs,
            mamba_slots=plan.mamba_slots,
            pending_token_field=self.follows_contract,
        )

    def _crash_soon(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """The crash fault: once called, the scheduler dies of a CUDA error shortly after."""
        failure = StartupFailure(
            "RuntimeError: CUDA error: an illegal memory access was encountered (sglbench sim: "
            f"SGLBENCH_SIM_CRASH_AFTER_REQUESTS={self.settings.crash_after_requests})",
            [
                (
                    f"{SGLANG_SRC}/srt/managers/scheduler.py",
                    2995,
                    "run_scheduler_process",
                    "scheduler.event_loop_overlap()",
                )
            ],
        )

        def die() -> None:
            self.fail(failure)
            os._exit(1)

        def crash() -> None:
            loop.call_later(0.05, die)

        return crash

    async def _bind(self, app: api.SimApp) -> asyncio.Server | None:
        """uvicorn's startup lines and the bound server, or None (logged, workers gone) when the
        address is taken."""
        args, log = self.args, self.log
        log(f"INFO:     Started server process [{os.getpid()}]")
        log("INFO:     Waiting for application startup.")
        log("INFO:     Application startup complete.")
        try:
            server = await serve(args.host, args.port, app.handle, _access_logger(log))
        except OSError as exc:
            log(
                f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                f"('{args.host}', {args.port}): {(exc.strerror or str(exc)).lower()}"
            )
            self.kill_workers()
            return None
        log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        return server

    async def _warmup(self, app: api.SimApp, facts: modelinfo.ModelFacts) -> None:
        """SGLang's warm-up request to itself, then ready (never, with the never-ready fault)."""
        if self.settings.never_ready:
            return
        if not self.args.skip_server_warmup:
            ids = textgen.encode("The capital city of France is", facts.vocab_size)
            req = app._new_request(
                ids, {"max_new_tokens": 8, "temperature": 0}, default_max_new=8, is_health=True
            )
            app._submit(req)
            await app._wait_done(req)
            peer = f"127.0.0.1:{40000 + os.getpid() % 20000}"
            self.log(f'INFO:     {peer} - "POST {sglang_facts.GENERATE} HTTP/1.1" 200 OK')
        hooks = self._request_hooks()
        if hooks:

            def on_request(n: int) -> None:
                for hook in hooks:
                    hook(n)

            app.engine.on_request = on_request
        app.ready = True
        self.log("The server is fired up and ready to roll!")

    def _request_hooks(self) -> list[Callable[[int], None]]:
        """What happens at the N-th generation request: a throttling episode that starts there, a fault
        plan the server claimed (sglbench/sim/faultplan.py); a throttle counted from ready starts now."""
        hooks: list[Callable[[int], None]] = []
        throttle, meter = self.settings.throttle, self.meter
        if throttle is not None and meter is not None:

            def episode() -> None:
                meter.set_throttle(time.monotonic() + throttle.offset_s, throttle.duration_s, throttle.kind)

            nth = self.settings.throttle_from_request
            if nth:
                hooks.append(lambda n: episode() if n == nth else None)
            else:
                episode()
        try:
            plan = faultplan.claim(self.settings.fault_plan)
        except (OSError, faultplan.FaultPlanError) as exc:
            self.log(f"ERROR: the stand-in cannot take its fault plan: {exc}")
            os._exit(1)  # a test's fault that cannot happen: stop here rather than pass unstruck
        if plan is not None:
            taken = f"{plan.action} at generation request {plan.request}"
            self.log(f"sglbench stand-in: fault plan taken: {taken}")
            hooks.append(faultplan.trigger(plan))
        return hooks

    def _shut_down(self, server: asyncio.Server, sigterm: bool) -> None:
        """uvicorn's shutdown lines (after SGLang's process-tree kill on SIGTERM), then the workers go."""
        log = self.log
        if sigterm:
            pid = os.getpid()
            log(f"kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}")
        log("INFO:     Shutting down")
        server.close()  # open keep-alive connections are dropped with the process
        log("INFO:     Waiting for application shutdown.")
        log("INFO:     Application shutdown complete.")
        log(f"INFO:     Finished server process [{os.getpid()}]")
        self.kill_workers(keep=0 if self.settings.orphan_worker else None)
        if self.meter is not None:
            self.meter.close()

    async def _drain(self, engine: Engine, served_at: float) -> None:
        """SGLang's ``sigterm_watchdog``: it looks every 5 s (scaled here) whether SIGTERM came, then
        waits for the requests in flight, logging how many are left every 5 s; new requests are
        still served meanwhile."""
        log, settings = self.log, self.settings
        tick = max(settings.scaled(5.0), 0.001)
        await asyncio.sleep(tick - ((time.monotonic() - served_at) % tick))
        while True:
            left = [r.rid for r in (*engine.running, *engine.waiting) if not r.is_health and not r.cancelled]
            log(
                f"Gracefully exiting... Remaining number of requests {len(left)}. "
                f"Remaining requests remaining_rids={left!r}."
            )
            if not left:
                return
            await asyncio.sleep(tick)


PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1


def _prctl(option: int, value: int | bytes) -> None:
    """Linux prctl(2) through libc (no-op where that is not available)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)


def _worker_main(parent_pid: int, orphan_ttl: float, name: str, die_with_parent: bool) -> NoReturn:
    """Body of a forked SGLang subprocess: hold (registered) GPU memory until killed."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _prctl(PR_SET_NAME, name.encode()[:15])  # what ps/comm shows: "sglang::schedul" as for SGLang
    if die_with_parent:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    orphaned_at: float | None = None
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            orphaned_at = orphaned_at or time.monotonic()
            if orphan_ttl > 0 and time.monotonic() - orphaned_at >= orphan_ttl:
                os._exit(0)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = load_settings()
    except SimSettingsError as exc:
        print(f"sglbench sim: {exc}", file=sys.stderr)
        return 2
    for name in unknown_variables():
        print(
            f"sglbench sim: warning: {name} is not a stand-in setting (see python/sglbench/sim/README.md)",
            file=sys.stderr,
        )
    # The impersonated release's own parser: a flag it lacks exits 2 with argparse's message.
    prog = prog or "python -m sglbench.sim"
    args = sglang_args.parse_launch_args(argv, prog=prog, release=settings.sglang_release)
    _yield_cpu(settings.nice)
    server = SimServer(_stand_in_view(args), settings)
    server.argv = list(argv)
    return server.run()


def _yield_cpu(nice: int) -> None:
    """Lower this process's CPU priority (its workers inherit it). The stand-in's CPU work stands for what
    a real server does on its GPUs, not on the host's CPUs: the benchmark client beside it on the same
    host must not wait for a CPU because of it, or the client's self-check marks its points invalid."""
    if nice > 0:
        with contextlib.suppress(OSError):
            os.nice(nice)
