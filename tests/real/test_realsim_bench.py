"""`ansible-playbook bench.yml` against the real-SGLang sim host: the real release under systemd.

One container for the module (scripts/simhost.sh up --real-sglang: the sim host image with the real
SGLang env bind-mounted read-only), one playbook run over inventory/realsim (two configs on the tiny dense
models, one real server start each), then checks of what it left: records, observed capacity from the real
server's log and /server_info, the journal, the benchmark points, the labels, and a host with nothing left
running. The tests only read; they run in file order after the fixture's single run.

Timings (container up, playbook, per config) go to build/real_sglang/<version>/realsim_timings.json and the
playbook's output to build/real_sglang/<version>/realsim_playbook.log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from host_probes import bench_lock_argv
from real_sglang import HAVE_ENV, NO_REAL_ENV, REPO, VERSION

SIMHOST = REPO / "scripts" / "simhost.sh"
OBSERVED = REPO / "build" / "real_sglang" / VERSION
INVENTORY = REPO / "inventory" / "realsim"
WRAPPER = f"/opt/sglang-{VERSION}-cpu/bin/python"
RUN_ID = "realsim-test"
# Bounds on failure only (a hung playbook or host call), sized for a loaded 2-core machine: a playbook holds
# up to two real server starts, each allowed inventory/realsim's readiness timeout (900 s).
PLAYBOOK_TIMEOUT = 3600.0
HOST_CALL_TIMEOUT = 300.0

# inventory/realsim/group_vars/sglang_gpu/matrix.yml: what each config asks for, and what the real CPU engine
# then allocates (max_running_requests: 4096 is its own default, derived from host RAM).
CONFIGS = {
    "tiny-qwen2-cpu": {"model_class": "Qwen2ForCausalLM", "tokens": 16384, "max_running_requests": 4096},
    "tiny-qwen3-cpu": {"model_class": "Qwen3ForCausalLM", "tokens": 8192, "max_running_requests": 8},
}
POINTS = ["c1-r0", "c2-r0"]  # inventory host.yml: concurrency [1, 2], one repeat
NUM_PROMPTS = 6
MAX_NEW_TOKENS = 16

pytestmark = pytest.mark.real
if not HAVE_ENV:  # one skip line for the module
    pytest.skip(NO_REAL_ENV, allow_module_level=True)


@dataclass
class Campaign:
    name: str  # the container
    results: Path  # <results>/<run_id>/realsim/<config>-tp1/
    rc: int
    output: str
    seconds: float

    def record(self, config: str) -> dict[str, Any]:
        return json.loads((self.results / f"{config}-tp1" / "record.json").read_text())

    def host(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", "exec", self.name, *argv],
            capture_output=True,
            text=True,
            timeout=HOST_CALL_TIMEOUT,
            env=_env(self.name),
        )


def _env(name: str) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "SGLBENCH_SIMHOST_NAME": name,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
    }
    if "CONTAINERS_CONF" not in env and (REPO / "build" / "podman" / "containers.conf").is_file():
        env["CONTAINERS_CONF"] = str(REPO / "build" / "podman" / "containers.conf")
    return env


def _save(name: str, text: str) -> None:
    OBSERVED.mkdir(parents=True, exist_ok=True)
    (OBSERVED / name).write_text(text)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (the real-SGLang sim host is a podman container)")
    if os.geteuid() != 0:
        pytest.skip("the real-SGLang sim host needs root (a rootful podman container running systemd)")
    name = f"sglbench-realsim-{os.getpid()}"
    env = _env(name)
    t0 = time.monotonic()
    up = subprocess.run(
        [str(SIMHOST), "up", "--real-sglang"], env=env, capture_output=True, text=True, timeout=900
    )
    up_s = time.monotonic() - t0
    if up.returncode == 3:
        pytest.skip(f"the real-SGLang sim host cannot run here: {up.stderr.strip()[-300:]}")
    assert up.returncode == 0, (
        f"scripts/simhost.sh up --real-sglang failed:\n{up.stdout}\n{up.stderr[-3000:]}"
    )
    results = tmp_path_factory.mktemp("realsim_results")
    try:
        t1 = time.monotonic()
        run = subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible-playbook"),
                str(REPO / "bench.yml"),
                "-i", str(INVENTORY),
                "-e", "tp=1",
                "-e", f"run_id={RUN_ID}",
                "-e", f"sglbench_results_dir={results}",
                "-e", f"ansible_host={name}",
            ],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=PLAYBOOK_TIMEOUT,
        )  # fmt: skip
        seconds = time.monotonic() - t1
        output = run.stdout + run.stderr
        _save("realsim_playbook.log", output)
        camp = Campaign(name, results / RUN_ID / "realsim", run.returncode, output, seconds)
        timings: dict[str, Any] = {"container_up_s": round(up_s, 1), "playbook_s": round(seconds, 1)}
        for config in CONFIGS:
            try:
                t = camp.record(config)["timings"]
                timings[config] = {k: t.get(k) for k in ("total_s", "time_to_ready_s", "stop_s", "health_s")}
            except (OSError, ValueError, KeyError):
                timings[config] = None
        _save("realsim_timings.json", json.dumps(timings, indent=2, sort_keys=True) + "\n")
        yield camp
    finally:
        subprocess.run(
            [str(SIMHOST), "down", "--real-sglang"], env=env, capture_output=True, timeout=HOST_CALL_TIMEOUT
        )


def test_playbook_completes_the_matrix(campaign: Campaign) -> None:
    recap = re.search(r"^realsim\s*:.*$", campaign.output, re.M)
    assert campaign.rc == 0, campaign.output[-6000:]
    assert recap and "failed=0" in recap[0] and "unreachable=0" in recap[0], recap
    assert sorted(p.name for p in campaign.results.iterdir() if p.is_dir()) == [f"{c}-tp1" for c in CONFIGS]


@pytest.mark.parametrize("config", CONFIGS)
def test_record_is_the_real_server_on_the_cpu_engine(campaign: Campaign, config: str) -> None:
    rec = campaign.record(config)
    assert rec["outcome"] == "ok", rec.get("failure")
    assert rec["simulated"] is False
    argv = rec["argv"]
    assert argv[:3] == [WRAPPER, "-m", "sglang.launch_server"], argv
    assert argv[argv.index("--device") + 1] == "cpu"
    unit = (campaign.results / f"{config}-tp1" / "unit.service").read_text()
    assert f"ExecStart={WRAPPER} -m sglang.launch_server" in unit or f" -- {WRAPPER} -m " in unit, unit
    # The plan was made (policy force: the GPU plan does not decide on this host) and recorded.
    decision = rec["plan"]["decision"]
    assert decision["policy"] == "force" and decision["action"] == "start", decision
    assert rec["plan"]["inputs"]["sglang"]["version"] == VERSION


@pytest.mark.parametrize("config", CONFIGS)
def test_observed_capacity_comes_from_the_real_server(campaign: Campaign, config: str) -> None:
    want = CONFIGS[config]
    rec = campaign.record(config)
    info = rec["observed"]["server_info"]
    assert info["version"] == VERSION
    assert info["max_total_num_tokens"] == want["tokens"]
    assert info["effective_max_running_requests"] == want["max_running_requests"]
    # The startup facts come from the unit's journal, i.e. the real server's own log lines.
    startup = rec["observed"]["startup"]
    assert startup["ready"] is True
    assert startup["model_class"] == want["model_class"]
    assert startup["kv"]["tokens"] == want["tokens"]
    assert startup["summary"] is not None, "the startup summary line (available_cpu_mem=...) was not parsed"
    assert startup["summary"]["max_total_num_tokens"] == want["tokens"]
    assert startup["summary"]["max_running_requests"] == want["max_running_requests"]
    assert startup["summary"]["context_len"] == 2048
    cap = rec["capacity"]
    assert cap["observed"]["max_total_num_tokens"] == want["tokens"]
    assert cap["observed"]["max_running_requests"] == want["max_running_requests"]
    assert cap["observed"]["sources"]["max_total_num_tokens"] == "server_info"
    # --max-total-tokens fixes the KV pool whatever the memory: the plan predicts exactly that.
    assert cap["predicted"]["max_total_num_tokens"] == want["tokens"]
    assert cap["error_pct"]["max_total_num_tokens"] == 0.0


@pytest.mark.parametrize("config", CONFIGS)
def test_journal_is_the_real_servers(campaign: Campaign, config: str) -> None:
    rec = campaign.record(config)
    journal = (campaign.results / f"{config}-tp1" / rec["journal"]["file"]).read_text()
    assert "The server is fired up and ready to roll!" in journal
    assert f"type={CONFIGS[config]['model_class']}" in journal
    assert "available_cpu_mem=" in journal
    assert "sglbench sim:" not in journal  # the stand-in's startup line
    assert rec["unit"]["invocation_id"], rec["unit"]


@pytest.mark.parametrize("config", CONFIGS)
def test_benchmark_points_measured(campaign: Campaign, config: str) -> None:
    attempt = campaign.results / f"{config}-tp1"
    rec = campaign.record(config)
    assert rec["benchmark"] is not None
    assert sorted(p.stem for p in (attempt / "points").glob("*.json")) == POINTS
    for point in POINTS:
        data = json.loads((attempt / "points" / f"{point}.json").read_text())
        assert data.get("outcome", "ok") == "ok", data
        rows = [
            json.loads(line)
            for line in (attempt / "points" / f"{point}.requests.jsonl").read_text().splitlines()
            if line.strip()
        ]
        measured = [r for r in rows if not r.get("warmup")]
        assert len(measured) == NUM_PROMPTS, len(measured)
        assert all(not r.get("error") for r in measured), [r.get("error") for r in measured]
        assert all(r["completion_tokens"] == MAX_NEW_TOKENS for r in measured)
    # Validity is not asserted: on 2 cores the CPU engine and the client share the CPUs, and the client
    # marks a point invalid when it waited for a CPU too long (the summary says why).


def test_results_are_labelled_cpu_engine(campaign: Campaign) -> None:
    from sglbench import results
    from sglbench.records import load_record
    from sglbench.summarize import CPU_BANNER, summary_table, to_markdown

    run_dir = campaign.results.parent
    for config in CONFIGS:
        rec = load_record(campaign.results / f"{config}-tp1" / "record.json")
        assert rec.device == "cpu" and rec.cpu_engine and not rec.simulated
    res = results.load(run_dir)
    assert res.cpu_engine and not res.simulated
    assert res.attempts["cpu_engine"].all() and res.points["cpu_engine"].all()
    text = to_markdown(summary_table(res, n_boot=200), res)
    assert CPU_BANNER in text and "SIMULATED" not in text
    assert text.count("| CPU |") == len(CONFIGS) * len(POINTS), text


def test_nothing_left_running(campaign: Campaign) -> None:
    for config in CONFIGS:
        stop = campaign.record(config)["stop"]
        assert stop["killed"] == [], stop  # systemd stopped every process; nothing needed killing
    active = campaign.host("systemctl", "list-units", "--no-legend", "--state=active", "sglang-*")
    assert active.stdout.strip() == "", active.stdout
    procs = campaign.host("ps", "-eo", "pid,args", "--no-headers")
    left = [line for line in procs.stdout.splitlines() if "sglang::" in line or "launch_server" in line]
    assert left == [], left


KILLED = "tiny-qwen2-cpu"
KILL_RUN_ID = "realsim-killed"
# Long enough that the kill lands inside the first point: ~400 x 64 tokens on the CPU engine.
KILL_LOAD = {
    "prompt_sets": ["chat"], "concurrency": [1, 2], "repeats": 1, "num_prompts": 400, "duration_s": 0,
    "max_new_tokens": 64, "warmup": 1, "request_timeout_s": 120,
}  # fmt: skip


def test_real_server_killed_mid_benchmark_is_classified_from_its_journal(campaign: Campaign) -> None:
    """SIGKILL of the real server's main process while a point runs: the attempt fails in the bench
    phase, classified from the real journal; the point measured across the kill is not kept valid; the
    play still ends with a failure summary and nothing left running."""
    results = campaign.results.parent.parent
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        str(REPO / "bench.yml"),
        "-i", str(INVENTORY),
        "-e", "tp=1",
        "-e", f"run_id={KILL_RUN_ID}",
        "-e", f"sglbench_results_dir={results}",
        "-e", f"ansible_host={campaign.name}",
        "-e", json.dumps({"sglang_cycle_configs": [KILLED], "sglbench_configs": [KILLED]}),
        "-e", json.dumps({"sglbench_bench": KILL_LOAD}),
    ]  # fmt: skip
    log = OBSERVED / "realsim_killed_playbook.log"
    OBSERVED.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, cwd=REPO, env=_env(campaign.name), stdout=fh, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + PLAYBOOK_TIMEOUT
            # the first point runs once its client holds the host's bench lock
            while time.monotonic() < deadline and proc.poll() is None:
                if campaign.host(*bench_lock_argv()).stdout.strip():
                    break
                time.sleep(0.5)
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(5)  # well inside the first point
            unit = f"sglang-{KILLED}-tp1.service"
            shot = campaign.host("systemctl", "kill", "--kill-whom=main", "--signal=SIGKILL", unit)
            assert shot.returncode == 0, shot.stderr
            rc = proc.wait(PLAYBOOK_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
    output = log.read_text()
    assert rc != 0, output[-3000:]  # the play ends failed, with its summary
    assert f"{KILLED}-tp1 (bench: " in output, output[-3000:]
    attempt = results / KILL_RUN_ID / "realsim" / f"{KILLED}-tp1"
    rec = json.loads((attempt / "record.json").read_text())
    failure = rec["failure"]
    assert rec["outcome"] == "failed" and failure["phase"] == "bench", failure
    assert failure["cause"] == "server_exited", failure
    assert "signal" in failure["message"] or "KILL" in failure["message"], failure
    journal = (attempt / rec["journal"]["file"]).read_text()
    assert "The server is fired up and ready to roll!" in journal  # the real server's own journal
    assert "status=9/KILL" in journal, journal[-2000:]
    for f in (attempt / "points").glob("c*.json"):  # what was committed is failed or invalid, never valid
        doc = json.loads(f.read_text())
        summary = doc.get("summary") or {}
        assert doc["outcome"] == "failed" or not summary.get("valid"), (f.name, doc["outcome"], summary)
    active = campaign.host("systemctl", "list-units", "--no-legend", "--state=active", "sglang-*")
    assert active.stdout.strip() == "", active.stdout
    procs = campaign.host("ps", "-eo", "pid,args", "--no-headers").stdout
    assert not [ln for ln in procs.splitlines() if "sglang::" in ln or "launch_server" in ln], procs
