"""Startup failures, fault injection, workers and GPU memory of the stand-in."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_harness import PYTHON_SRC, REPO, Sim, launch, model, sim_env

from sglbench.hostlib import capacity, sglang_args, sglang_logs

MISSION = [
    "--model-path",
    model("qwen3.6-27b"),
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    model("qwen3.6-27b-dflash"),
    "--mem-fraction-static",
    "0.75",
    "--max-running-requests",
    "8",
    "--context-length",
    "32768",
    "--mamba-radix-cache-strategy",
    "extra_buffer",
]


def run_to_exit(tmp_path: Path, args: list[str], **env: str) -> tuple[int, str]:
    sim = launch(tmp_path, args, wait_ready=False, **env)
    try:
        code = sim.wait_exit(20)
    finally:
        sim.stop()
    return code, sim.log()


def planned(args: list[str], accounting: str, weights_gib: float | None = None) -> capacity.Plan:
    ns = sglang_args.parse_launch_args_or_raise([*args, "--port", "1"])
    cfg = json.loads(Path(ns.model_path, "config.json").read_text())
    draft = None
    if ns.speculative_draft_model_path:
        draft = json.loads(Path(ns.speculative_draft_model_path, "config.json").read_text())
    return capacity.plan(
        ns,
        cfg,
        draft,
        97887 / 1024,
        weights_gib=weights_gib,
        accounting=accounting,
        model_dir=ns.model_path,
        draft_model_dir=ns.speculative_draft_model_path,
        recommend=False,
    )


def index_of(log: str, needle: str) -> int:
    pos = log.find(needle)
    assert pos >= 0, f"{needle!r} not in log:\n{log}"
    return pos


def test_unknown_flag_exits_2_naming_it(tmp_path: Path) -> None:
    code, log = run_to_exit(tmp_path, ["--model-path", model("qwen3-8b"), "--no-such-flag"])
    assert code == 2 and "unrecognized arguments: --no-such-flag" in log
    assert sglang_logs.classify_failure(log)["cause"] == "bad_args"


def test_bad_setting_exits_2_naming_variable(tmp_path: Path) -> None:
    code, log = run_to_exit(tmp_path, ["--model-path", model("qwen3-8b")], SGLBENCH_SIM_TIME_SCALE="fast")
    assert code == 2 and "SGLBENCH_SIM_TIME_SCALE" in log


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "does not appear to have a file named config.json"),
        ("{not json", "is not a valid JSON file"),
    ],
)
def test_missing_or_malformed_config(tmp_path: Path, content: str | None, needle: str) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    if content is not None:
        (model_dir / "config.json").write_text(content)
    code, log = run_to_exit(tmp_path, ["--model-path", str(model_dir)])
    assert code == 1 and needle in log
    assert "Load weight begin" not in log and "Traceback (most recent call last):" in log
    assert sglang_logs.classify_failure(log)["cause"] == "bad_args"


def test_mission_case_fails_with_zero_requests_like_sglang(tmp_path: Path) -> None:
    code, log = run_to_exit(tmp_path, MISSION, SGLBENCH_SIM_WEIGHTS_GIB="51.05")
    assert code != 0
    # the same lines, in SGLang's order, before the assertion
    order = [
        "Load weight begin",
        "Load weight end",
        "Mamba Cache is allocated",
        "KV Cache is allocated",
        "Memory pool end",
        "AssertionError: max_running_request is zero",
    ]
    positions = [index_of(log, n) for n in order]
    assert positions == sorted(positions)
    assert "fired up" not in log and "Uvicorn running" not in log
    parsed = sglang_logs.parse_startup_log(log)
    plan = planned(MISSION, "A", 51.05)
    assert parsed["mamba"]["slots"] == plan.mamba_slots
    assert parsed["kv"]["tokens"] == plan.max_total_num_tokens
    assert parsed["kv"]["dtype"] is None  # V1 form of the KV line
    assert parsed["weights_gib"] == pytest.approx(51.05)
    assert parsed["load_begin_avail_gib"] == pytest.approx(94.24, abs=0.01)
    assert parsed["mamba"]["intermediate_ssm_gib"] is not None
    failure = sglang_logs.classify_failure(log)
    assert failure["cause"] == "zero_requests"
    assert any("max_running_request is zero" in line for line in failure["lines"])


def test_variant_b_raises_runtime_error_after_v3_lines(tmp_path: Path) -> None:
    args = [
        *MISSION[:-6],
        "--max-running-requests",
        "48",
        "--mem-fraction-static",
        "0.58",
        "--context-length",
        "32768",
        "--mamba-radix-cache-strategy",
        "extra_buffer",
    ]
    plan = planned(args, "B", 51.05)
    assert plan.failure is not None and plan.failure.kind == "zero_requests"
    code, log = run_to_exit(tmp_path, args, SGLBENCH_SIM_WEIGHTS_GIB="51.05", SGLBENCH_SIM_ACCOUNTING="B")
    assert code != 0
    assert (
        "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests." in log
    )
    assert sglang_logs.parse_startup_log(log)["kv"]["dtype"] == "torch.bfloat16"  # V3 form
    assert sglang_logs.classify_failure(log)["cause"] == "zero_requests"


@pytest.mark.parametrize(
    ("accounting", "text"),
    [
        (
            "A",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.1",
        ),
        (
            "C",
            "ValueError: Loaded weights leave no GPU memory for the KV cache under "
            "--mem-fraction-static=0.1.",
        ),
    ],
)
def test_not_enough_memory(tmp_path: Path, accounting: str, text: str) -> None:
    code, log = run_to_exit(
        tmp_path,
        ["--model-path", model("qwen3-8b"), "--mem-fraction-static", "0.1"],
        SGLBENCH_SIM_ACCOUNTING=accounting,
    )
    assert code != 0 and text in log
    assert index_of(log, "Load weight end") < index_of(log, text)
    assert "KV Cache is allocated" not in log
    assert sglang_logs.classify_failure(log)["cause"] == "not_enough_memory"


@pytest.mark.parametrize(
    ("mode", "needle", "cause"),
    [
        ("oom", "torch.OutOfMemoryError: CUDA out of memory", "cuda_oom"),
        ("corrupt", "Error while deserializing header", "unknown"),
    ],
)
def test_fail_during_weight_load(tmp_path: Path, mode: str, needle: str, cause: str) -> None:
    code, log = run_to_exit(
        tmp_path, ["--model-path", model("llama-3.1-8b-instruct")], SGLBENCH_SIM_FAIL_LOAD=mode
    )
    assert code != 0 and needle in log
    assert "Load weight begin" in log and "Load weight end" not in log
    got = sglang_logs.classify_failure(log)["cause"]
    assert got == cause if cause != "unknown" else got in ("unknown", "readiness_timeout")


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        sim = launch(tmp_path, ["--model-path", model("qwen3-8b")], wait_ready=False, port=port)
        try:
            code = sim.wait_exit(20)
        finally:
            sim.stop()
    log = sim.log()
    assert code == 1 and "address already in use" in log
    assert sglang_logs.classify_failure(log)["cause"] == "port_in_use"
    assert sim.holders() == {}  # workers were killed


def test_never_ready_keeps_health_503(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")], wait_ready=False, SGLBENCH_SIM_NEVER_READY="1")
    assert sim.wait_log("Uvicorn running")
    for _ in range(3):
        assert sim.request("/health")[0] == 503
        assert sim.request("/health_generate")[0] == 503
    assert sglang_logs.classify_failure(sim.log())["cause"] == "readiness_timeout"


def test_slow_start_delays_weight_loading(start_sim) -> None:
    sim: Sim = start_sim(
        ["--model-path", model("qwen3-8b")], wait_ready=False, SGLBENCH_SIM_SLOW_START_SECONDS="1000000"
    )
    assert sim.wait_log("Init parallel ends")  # 0.5.23's line (older releases: Init torch distributed)
    time.sleep(0.3)
    assert "Load weight begin" not in sim.log()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", sim.port), timeout=1).close()
    assert len(sim.holders()) == 1  # the worker already holds its CUDA context
    sim.proc.send_signal(signal.SIGTERM)  # stopping during startup kills the workers too
    assert sim.wait_exit(10) == 0
    assert sim.holders() == {}


def test_crash_after_n_requests(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_CRASH_AFTER_REQUESTS="2")
    for _ in range(2):
        assert sim.json("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})[0] == 200
    assert sim.wait_exit(10) == 1
    assert "Scheduler hit an exception" in sim.log()
    assert sim.holders() == {}


def test_error_rate_answers_500(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_ERROR_RATE="1")
    status, out = sim.json("/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert status == 500 and out["object"] == "error" and out["code"] == 500
    status, out = sim.json("/generate", {"text": "x"})
    assert status == 500 and "message" in out["error"]
    assert sim.request("/health")[0] == 200  # probes are not failed


def test_sigterm_frees_gpu_memory(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")])
    held = sim.holders()
    assert len(held) == 1 and sim.proc.pid not in held and next(iter(held.values())) > 10_000
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(10) == 0
    assert sim.holders() == {}


def test_sigkill_of_main_takes_its_workers_along(start_sim) -> None:
    """SGLang's subprocesses set PR_SET_PDEATHSIG (kill_itself_when_parent_died): SIGKILL of the main
    process kills its schedulers and detokenizer too, and their GPU memory is free again."""
    sim: Sim = start_sim(["--model-path", model("qwen3-8b"), "--tp", "2"])
    workers = sim.holders()
    assert len(workers) == 2
    main = sim.proc.pid
    children = [int(p) for p in Path(f"/proc/{main}/task/{main}/children").read_text().split()]
    names = sorted(Path(f"/proc/{pid}/comm").read_text().strip() for pid in children)
    assert names == ["sglang::detoken", "sglang::schedul", "sglang::schedul"]
    sim.proc.kill()
    sim.wait_exit(10)
    deadline = time.monotonic() + 5
    while sim.holders() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sim.holders() == {}
    for pid in children:
        with contextlib.suppress(ChildProcessError, FileNotFoundError):
            assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_orphan_worker_fault(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b"), "--tp", "2"], SGLBENCH_SIM_ORPHAN_WORKER="1")
    assert len(sim.holders()) == 2
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(10) == 0
    left = sim.holders()
    assert len(left) == 1 and next(iter(left.values())) > 10_000
    pid = next(iter(left))
    os.kill(pid, 0)  # still alive
    os.kill(pid, signal.SIGKILL)


def test_nvidia_smi_shows_memory_on_assigned_gpus(start_sim) -> None:
    sim: Sim = start_sim(["--model-path", model("qwen3-8b"), "--tp-size", "2"], CUDA_VISIBLE_DEVICES="2,5")
    rows = [
        line.split(", ")
        for line in sim.nvidia_smi(
            "--query-gpu=index,name,memory.total,memory.used,memory.free,uuid",
            "--format=csv,noheader,nounits",
        ).splitlines()
    ]
    assert len(rows) == 8
    used = {int(r[0]): int(r[3]) for r in rows}
    assert used[2] > 0 and used[2] == used[5]
    assert all(used[i] == 0 for i in used if i not in (2, 5))
    assert all(r[1] == "NVIDIA RTX PRO 6000 Blackwell Server Edition" and r[2] == "97887" for r in rows)
    assert all(int(r[2]) - int(r[3]) == int(r[4]) for r in rows)
    uuids = {r[5]: int(r[0]) for r in rows}
    apps = [
        line.split(", ")
        for line in sim.nvidia_smi(
            "--query-compute-apps=pid,used_memory,gpu_uuid,process_name",
            "--format=csv,noheader,nounits",
        ).splitlines()
    ]
    assert sorted(uuids[a[2]] for a in apps) == [2, 5]
    assert all(int(a[1]) == used[uuids[a[2]]] for a in apps)
    listing = sim.nvidia_smi("-L").splitlines()
    assert listing[0].startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")
    header = sim.nvidia_smi("--query-gpu=index,memory.used", "--format=csv").splitlines()[0]
    assert header == "index, memory.used [MiB]"
    # TP>1 log lines carry TPn tags; the summary is TP0 only
    log = sim.log()
    assert "TP1] Load weight end" in log and "TP1] max_total_num_tokens=" not in log
    assert sglang_logs.parse_startup_log(log)["tp_size"] == 2


def test_second_server_on_same_gpu_sees_less_free_memory(start_sim) -> None:
    first: Sim = start_sim(["--model-path", model("qwen3-8b"), "--mem-fraction-static", "0.3"])
    held_gib = sum(first.holders().values()) / 1024
    second: Sim = start_sim(
        ["--model-path", model("llama-3.1-8b-instruct"), "--mem-fraction-static", "0.3"], env=first.env
    )
    a = sglang_logs.parse_startup_log(first.log())["load_begin_avail_gib"]
    b = sglang_logs.parse_startup_log(second.log())["load_begin_avail_gib"]
    assert b == pytest.approx(a - held_gib, abs=0.02)


def test_sglang_shim_runs_the_stand_in_with_version(tmp_path: Path) -> None:
    shim = PYTHON_SRC / "sglbench" / "sim" / "sglang_shim"
    env = sim_env(tmp_path / "state", SGLBENCH_SIM_SGLANG_VERSION="0.5.23", SGLBENCH_SIM_ACCOUNTING="")
    env["PYTHONPATH"] = f"{PYTHON_SRC}{os.pathsep}{shim}"
    version = subprocess.run(
        [sys.executable, "-c", "import sglang; print(sglang.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.strip()
    assert version == "0.5.23"
    sim = launch(tmp_path, ["--model-path", model("qwen3-8b")], env=env, module="sglang.launch_server")
    try:
        status, info = sim.json("/server_info")
        assert status == 200 and info["version"] == "0.5.23"
        assert info["sglbench_sim"]["accounting"] == "C"
        assert "KV Cache is allocated. dtype: torch.bfloat16, #tokens:" in sim.log()
    finally:
        sim.stop()


def test_bare_interpreter_runs_without_installed_packages(tmp_path: Path) -> None:
    """python3 -I-like isolation: no site-packages, only PYTHONPATH=python."""
    env = sim_env(tmp_path / "state")
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sglbench.sim.server, sys; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
            "and m.split('.')[0] not in ('sglbench', '__main__')))",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert probe.stdout.strip() == "[]"


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_the_server_and_its_workers_yield_the_cpu_by_the_niceness_asked(start_sim) -> None:
    """SGLBENCH_SIM_NICE: the stand-in's CPU work stands for GPU work, the client beside it goes first."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_NICE="2")  # 2: quick to start
    pids = [sim.proc.pid, *sim.holders()]  # the main process and its worker
    assert len(pids) == 2 and {_nice(pid) for pid in pids} == {min(base + 2, 19)}
    plain: Sim = start_sim(["--model-path", model("qwen3-8b")])
    assert _nice(plain.proc.pid) == base  # by default, as it was started
