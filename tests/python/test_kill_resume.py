"""Kill-and-resume on the sim host: SIGKILL ansible-playbook mid-benchmark, re-run, nothing lost or doubled.

Starts its own sim host container (``SGLBENCH_SIMHOST_NAME`` = sglbench-simhost-killresume-<pid>, never
``sglbench-simhost`` which ``make demo`` uses) from ``$SGLBENCH_SIMHOST_IMAGE``, with a two-config
matrix and a tiny load:

1. run 1 is killed (SIGKILL of the whole ansible-playbook process group) once the host has spooled two
   points of the first config: its ladder is one host call, so none is committed on the controller yet.
   The host's client is stopped first, inside its third point (tests/python/client_hold.py), so the kill
   finds the call unreturned however slow the machine; run 2's stop phase ends it;
2. run 2 (same run id) completes the campaign: every expected point exists exactly once, and the points
   the killed call had spooled are committed from the host's spool, not measured again;
3. run 3 changes one config (other argv, so another hash): that config is measured again, its previous
   record and points moved aside as stale; the unchanged config is reused without starting its server.

A second test lets the server die mid-benchmark: the failure is classified from its journal, the points
measured before are kept, and the campaign goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import simhost_util as sh
from client_hold import hold_client

REPO = Path(__file__).resolve().parents[2]
SIM_NAME = f"sglbench-simhost-killresume-{os.getpid()}"  # two test runs never share a container
RUN_ID = "killresume"
CONFIGS = ("kr-ar", "kr-dflash")
LOAD = {"prompt_sets": ["math", "chat"], "concurrency": [1, 2], "repeats": 2, "num_prompts": 4}
LOAD |= {"max_new_tokens": 16, "warmup": 1}
KEYS = ["c1-r0", "c1-r1", "c2-r0", "c2-r1"]


def _matrix(ar_context: int = 32768) -> list[dict[str, Any]]:
    return [
        {
            "name": "kr-ar",
            "model_path": "/models/qwen3-8b",
            "tp": [1],
            "args": {"context_length": ar_context},
        },
        {
            "name": "kr-dflash",
            "model_path": "/models/qwen3-8b",
            "algorithm": "DFLASH",
            "draft_model_path": "/models/qwen3-8b-dflash-b16",
            "tp": [1],
            "args": {"max_running_requests": 16, "context_length": 32768},
        },
    ]


def _env() -> dict[str, str]:
    return sh.env(SIM_NAME)


def _cmd(results: Path, matrix: list[dict[str, Any]]) -> list[str]:
    extra = {
        "tp": "1",
        "ansible_host": SIM_NAME,
        "sglbench_run_id": RUN_ID,
        "sglbench_results_dir": str(results),
        "sglbench_matrix": matrix,
        "sglbench_bench": LOAD,
    }
    exe = shutil.which("ansible-playbook", path=_env()["PATH"]) or "ansible-playbook"
    return [
        exe,
        str(REPO / "playbooks" / "bench.yml"),
        "-i",
        str(REPO / "inventory" / "sim"),
        "-e",
        json.dumps(extra),
    ]


def _run(results: Path, matrix: list[dict[str, Any]], log: Path) -> int:
    with log.open("w") as fh:
        proc = subprocess.run(
            _cmd(results, matrix),
            cwd=REPO,
            env=_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=1500,  # bounds a failure only (a loaded 2-core machine)
            check=False,
        )
    return proc.returncode


def _read(p: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(p.read_text())
    return data


def _spooled(instance: str) -> list[str]:
    """The points the sim host keeps for this run's attempt of ``instance`` (the bench call's spool)."""
    out = subprocess.run(
        ["podman", "exec", SIM_NAME, "ls", f"/run/sglbench/spool/{RUN_ID}-{instance}"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return sorted(n[: -len(".json")] for n in out.stdout.split() if n.endswith(".json"))


def _starts(unit: str) -> int:
    """How many times the unit was started on the sim host (distinct invocation ids in its journal)."""
    out = subprocess.run(
        ["podman", "exec", SIM_NAME, "journalctl", "-u", unit, "-o", "json", "--no-pager"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    ids = set()
    for line in out.stdout.splitlines():
        entry = json.loads(line)
        ids.update(entry[k] for k in ("INVOCATION_ID", "_SYSTEMD_INVOCATION_ID") if k in entry)
    return len(ids)


@pytest.fixture
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


@pytest.mark.simhost
def test_kill_mid_benchmark_then_resume(
    sim_host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # points of 2-6 s, which the watcher holding the client (a look every 50 ms) cannot miss
    monkeypatch.setattr(sys.modules[__name__], "LOAD", LOAD | {"num_prompts": 80, "max_new_tokens": 64})
    results = tmp_path / "results"
    host_dir = results / RUN_ID / "simhost"
    ar, dflash = host_dir / "kr-ar-tp1", host_dir / "kr-dflash-tp1"

    # 1. start, SIGKILL the playbook (and its workers) once the host spooled two kr-ar points, mid-call
    log1 = (tmp_path / "run1.log").open("w")
    proc = subprocess.Popen(
        _cmd(results, _matrix()),
        cwd=REPO,
        env=_env(),
        stdout=log1,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        hold_client(SIM_NAME, f"/run/sglbench/spool/{RUN_ID}-kr-ar-tp1", KEYS[:2], KEYS[-1])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        # Ansible's workers run in sessions of their own (setsid): end them too, as stopping a whole
        # service or container would; each has the results directory on its command line
        subprocess.run(["pkill", "-KILL", "-f", str(results)], check=False)
        proc.wait(timeout=60)
        log1.close()
    spooled = _spooled("kr-ar-tp1")
    assert len(spooled) >= 2, (tmp_path / "run1.log").read_text()[-3000:]
    # the ladder is one host call, killed before it returned: nothing committed on the controller
    assert not sh.point_files(ar / "points", "c*"), "the kill came too late: the call had returned"
    assert not (ar / "record.json").exists() and not (dflash / "record.json").exists()

    # 2. re-run the same campaign: completes it, the spooled points taken from the host as they were
    run2_at = time.time()
    rc2 = _run(results, _matrix(), tmp_path / "run2.log")
    assert rc2 == 0, (tmp_path / "run2.log").read_text()[-4000:]
    for d in (ar, dflash):
        rec = _read(d / "record.json")
        assert rec["outcome"] == "ok" and rec["simulated"] is True
        assert [p.stem for p in sh.point_files(d / "points")] == KEYS
        pts = [(p["point"], p["repeat"]) for p in rec["benchmark"]["points"]]
        assert pts == [("c1", 0), ("c1", 1), ("c2", 0), ("c2", 1)]  # each point once, in order
        rows = pq.read_table(d / "requests.parquet").to_pylist()
        measured = [(r["point"], r["repeat"]) for r in rows if not r.get("warmup")]
        for point in pts:  # every point's requests once: num_prompts rows, no duplicate request index
            idx = [r["idx"] for r in rows if (r["point"], r["repeat"]) == point and not r.get("warmup")]
            assert len(idx) == LOAD["num_prompts"] and len(set(idx)) == len(idx), (point, idx)
        assert len(measured) == len(KEYS) * LOAD["num_prompts"]
    # the spooled points were measured by the killed run's call (its client, held, spooled no more), the
    # others by run 2
    t0 = {k: _read(ar / "points" / f"{k}.json")["summary"]["t0_unix"] for k in KEYS}
    from_run1 = sorted(k for k in KEYS if t0[k] < run2_at)
    assert from_run1 == spooled, (t0, run2_at, spooled)
    res = _read(ar / "record.json")["benchmark"]["resume"]
    assert sorted(res["measured"]) == KEYS and res["missing"] == []
    assert _spooled("kr-ar-tp1") == [] and _spooled("kr-dflash-tp1") == []  # committed: the spools are gone
    dflash_hash = _read(dflash / "record.json")["identity"]["hash"]
    dflash_mtime = (dflash / "record.json").stat().st_mtime_ns
    dflash_starts = _starts("sglang-kr-dflash-tp1.service")

    # 3. a changed config (another --context-length, so another hash) is measured again, never reused
    old_hash = _read(ar / "record.json")["identity"]["hash"]
    rc3 = _run(results, _matrix(ar_context=16384), tmp_path / "run3.log")
    assert rc3 == 0, (tmp_path / "run3.log").read_text()[-4000:]
    rec = _read(ar / "record.json")
    assert rec["identity"]["hash"] != old_hash and "16384" in rec["argv"]
    assert (
        sorted(rec["benchmark"]["resume"]["measured"]) == KEYS and rec["benchmark"]["resume"]["reused"] == []
    )
    stale = list((ar / "previous").glob("*-stale"))
    assert len(stale) == 1 and (stale[0] / "record.json").is_file()
    assert [p.stem for p in sh.point_files(stale[0] / "points")] == KEYS
    # the unchanged config was reused as it was: same record, its server not started again
    assert (dflash / "record.json").stat().st_mtime_ns == dflash_mtime
    assert _read(dflash / "record.json")["identity"]["hash"] == dflash_hash
    assert dflash_starts >= 1 and _starts("sglang-kr-dflash-tp1.service") == dflash_starts
    assert "reused the completed attempt" in (tmp_path / "run3.log").read_text()


@pytest.mark.simhost
def test_server_exit_mid_benchmark_is_classified_and_the_campaign_goes_on(
    sim_host: str, tmp_path: Path
) -> None:
    """The server dies while it is benchmarked (the stand-in's scheduler exception after 12 requests):
    the attempt is recorded as failed in the bench phase with the cause and evidence from its journal
    (not only the client's 'connection refused'), the points measured before the exit are kept, the one it
    died in is failed or invalid, and the next config runs."""
    results = tmp_path / "results"
    matrix = _matrix()
    matrix[0]["env"] = {"SGLBENCH_SIM_CRASH_AFTER_REQUESTS": "12"}
    rc = _run(results, matrix, tmp_path / "run.log")
    log = (tmp_path / "run.log").read_text()[-4000:]
    # every config ran, then the play failed with a summary naming the failed one
    assert rc == 2, log
    assert "1 of 2 config attempts failed on simhost: kr-ar-tp1 (bench: server_exited)" in log, log
    host_dir = results / RUN_ID / "simhost"
    crashed = _read(host_dir / "kr-ar-tp1" / "record.json")
    failure = crashed["failure"]
    assert crashed["outcome"] == "failed", log
    assert failure["phase"] == "bench" and failure["cause"] == "server_exited", failure
    assert failure["message"].startswith("the server exited during the bench phase"), failure
    assert "exit status 1" in failure["message"], failure
    assert any("illegal memory access" in line for line in failure["lines"]), failure
    assert failure["unit_state"]["active_state"] == "failed"
    assert "Scheduler hit an exception" in (host_dir / "kr-ar-tp1" / "journal.log").read_text()
    points = {p.stem: _read(p) for p in sh.point_files(host_dir / "kr-ar-tp1" / "points", "c*")}
    assert any(p["outcome"] == "ok" for p in points.values()), points.keys()  # measured before the exit
    # The point the server died in: failed when none of its requests had succeeded, else kept with its
    # failed requests counted and judged invalid (which one depends on what was in flight when it died: a
    # concurrency-2 point on a loaded machine may finish some of its requests first).
    died = [
        p
        for p in points.values()
        if p["outcome"] == "failed" or ((p.get("summary") or {}).get("n_err") or 0) > 0
    ]
    assert len(died) == 1, points.keys()
    assert died[0]["outcome"] == "failed" or died[0]["summary"]["valid"] is False, died[0]
    nxt = _read(host_dir / "kr-dflash-tp1" / "record.json")
    assert nxt["outcome"] == "ok" and len(nxt["benchmark"]["points"]) == len(KEYS)


@pytest.mark.simhost
def test_point_measured_while_the_server_died_is_invalid_and_never_reused(
    sim_host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """the server dies in the middle of a point (the stand-in's scheduler exception after
    32 finished generation requests: c1-r0 is 20, so it happens about halfway through c1-r1, whose remaining
    requests then fail). That point used to be committed ok and valid with its requests failed, and reused on
    every re-run. Now it is kept but invalid, with the failed requests counted and the error named; the
    re-run moves it aside as 'errors' and measures it again (the fresh server gets through its 20 requests),
    while the complete point before it is reused untouched."""
    load = {"prompt_sets": ["math"], "concurrency": [1], "repeats": 2, "num_prompts": 20}
    monkeypatch.setattr(sys.modules[__name__], "LOAD", load | {"max_new_tokens": 64, "warmup": 0})
    results = tmp_path / "results"
    matrix = _matrix()[:1]
    matrix[0]["env"] = {"SGLBENCH_SIM_CRASH_AFTER_REQUESTS": "32"}
    _run(results, matrix, tmp_path / "run1.log")  # its exit code is the play's failure summary (defect 7)
    ar = results / RUN_ID / "simhost" / "kr-ar-tp1"
    log1 = (tmp_path / "run1.log").read_text()[-4000:]
    docs = {p.stem: _read(p) for p in sh.point_files(ar / "points", "c*")}
    brief = {k: (d["outcome"], (d["summary"] or {}).get("n_err")) for k, d in docs.items()}
    assert brief == {"c1-r0": ("ok", 0), "c1-r1": ("ok", brief["c1-r1"][1])}, (brief, log1)
    summary = docs["c1-r1"]["summary"]
    assert summary["n_err"] > 0 and summary["n_ok"] > 0 and summary["valid"] is False, summary
    reason = next(r for r in summary["invalid_reasons"] if "requests failed" in r)
    assert reason.startswith(f"{summary['n_err']} of {summary['n_requests']} requests failed"), reason
    kept_mtime = (ar / "points" / "c1-r0.json").stat().st_mtime_ns

    rc2 = _run(results, matrix, tmp_path / "run2.log")
    log2 = (tmp_path / "run2.log").read_text()[-4000:]
    assert rc2 == 0, log2
    rec = _read(ar / "record.json")
    assert rec["outcome"] == "ok", log2
    resume = rec["benchmark"]["resume"]
    assert resume["reused"] == ["c1-r0"] and resume["measured"] == ["c1-r1"], resume
    assert (ar / "points" / "c1-r0.json").stat().st_mtime_ns == kept_mtime
    moved = list((ar / "previous").glob("*-errors/points/c1-r1.json"))
    assert len(moved) == 1 and _read(moved[0])["summary"]["n_err"] == summary["n_err"]
    again = _read(ar / "points" / "c1-r1.json")["summary"]
    assert again["n_err"] == 0 and not any("requests failed" in r for r in again["invalid_reasons"])
