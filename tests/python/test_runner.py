"""sglbench run: exit codes and progress with a fake ansible-runner, and (simhost) one real run."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import recordfactory as rf

from sglbench import cli, lock, results, runner

REPO = Path(__file__).resolve().parents[2]
INVENTORY = {
    "_meta": {"hostvars": {"gpu1": {"ansible_host": "10.0.0.1"}, "gpu2": {}}},
    "all": {"children": ["sglang_gpu", "ungrouped"]},
    "sglang_gpu": {"children": ["rack_a"]},
    "rack_a": {"hosts": ["gpu1", "gpu2"]},
}


class FakeResult:
    def __init__(self, status: str, rc: int) -> None:
        self.status, self.rc = status, rc


def _ev(kind: str, host: str, task: str, res: dict | None = None, role: str = "sglang_cycle") -> dict:
    return {
        "event": kind,
        "created": "2026-11-29T10:00:00+00:00",
        "event_data": {"host": host, "task": task, "role": role, "res": res or {}},
    }


def _units(host: str, configs: list[str]) -> list[dict]:
    insts = [{"name": f"{c}-tp1", "config": c, "tp": 1} for c in configs]
    return [
        _ev(
            "runner_on_ok",
            host,
            "units | Compute the unit instances of the matrix",
            {"ansible_facts": {"sglang_units_instances": insts}},
            role="sglang_units",
        ),
        _ev(
            "runner_on_ok",
            host,
            "preflight | Select the TP phases to run",
            {"ansible_facts": {"sglang_preflight_phases": [1]}},
            role="sglang_preflight",
        ),
    ]


def fake_runner(
    outcomes: dict[str, str],
    *,
    extra_events: list[dict] | None = None,
    status: str = "successful",
    rc: int = 0,
    write: bool = True,
    calls: list[dict] | None = None,
):
    """Plays ansible_runner.run: emits events, writes records like the playbook, returns a result."""

    def run(**kw: Any) -> FakeResult:
        if calls is not None:
            calls.append(kw)
        ev = kw["extravars"]
        handler = kw["event_handler"]
        root = Path(ev["sglbench_results_dir"])
        for e in _units("gpu1", list(outcomes)):
            handler(e)
        for e in extra_events or []:
            handler(e)
        for cfg, outcome in outcomes.items():
            handler(_ev("runner_on_ok", "gpu1", f"cycle | Begin the attempt of {cfg}-tp1"))
            handler(_ev("runner_on_ok", "gpu1", "cycle | Enter the health phase"))
            if write:
                failure = (
                    None if outcome == "ok" else {"phase": "health", "cause": "cuda_oom", "message": "OOM"}
                )
                bench = rf.bench([rf.point(1, 0, 10.0)]) if outcome == "ok" else None
                rf.write(
                    root,
                    rf.record(
                        run_id=ev["run_id"],
                        host="gpu1",
                        config=cfg,
                        outcome=outcome,
                        failure=failure,
                        benchmark=bench,
                    ),
                )
            handler(
                _ev("runner_on_ok", "gpu1", f"cycle | Report {cfg}-tp1", {"msg": f"{cfg}-tp1: {outcome}"})
            )
        handler(
            {
                "event": "playbook_on_stats",
                "created": "2026-11-29T10:00:05+00:00",
                "event_data": {"ok": {"gpu1": 10}, "failures": {}, "dark": {}},
            }
        )
        return FakeResult(status, rc)

    return run


def _opts(tmp_path: Path, **kw: Any) -> runner.RunOptions:
    return runner.RunOptions(
        project_dir=REPO, results_dir=tmp_path / "results", lock_dir=tmp_path / "locks", **kw
    )


def _run(tmp_path: Path, fn, lines: list[str] | None = None, **kw: Any) -> runner.RunOutcome:
    out = lines if lines is not None else []
    return runner.run_campaign(
        _opts(tmp_path, **kw), runner_fn=fn, inventory_fn=lambda _o: INVENTORY, out=out.append
    )


def test_all_ok_exits_0_and_keeps_artifacts_per_run(tmp_path: Path) -> None:
    calls: list[dict] = []
    lines: list[str] = []
    o = _run(
        tmp_path,
        fake_runner({"ar": "ok", "dflash": "ok"}, calls=calls),
        lines,
        tp="1",
        configs=["ar", "dflash"],
        policy="skip",
    )
    assert o.exit_code == 0
    kw = calls[0]
    assert kw["private_data_dir"] == str(o.run_dir / "_runner")
    assert kw["playbook"].endswith("playbooks/bench.yml") and kw["ident"].startswith("invocation-")
    ev = kw["extravars"]
    assert ev["tp"] == "1" and ev["run_id"] == o.run_id == ev["sglbench_run_id"]
    assert ev["sglang_cycle_configs"] == ["ar", "dflash"] and ev["policy"] == "skip"
    assert str(Path(sys.executable).parent) in kw["envvars"]["PATH"].split(os.pathsep)[0]
    meta = json.loads((o.run_dir / "_runner" / "run.json").read_text())
    assert (
        meta["status"] == "finished"
        and meta["exit_code"] == 0
        and meta["hosts"] == {"gpu1": "10.0.0.1", "gpu2": "gpu2"}
    )
    assert any(line.startswith("gpu1: [2/2] TP1 dflash-tp1 health") for line in lines)


def test_failed_config_exits_1(tmp_path: Path) -> None:
    assert _run(tmp_path, fake_runner({"ar": "ok", "oom": "failed"})).exit_code == 1


def test_unreachable_host_exits_2(tmp_path: Path) -> None:
    unreachable = _ev("runner_on_unreachable", "gpu2", "Gathering Facts", {"msg": "ssh: connect timed out"})
    o = _run(tmp_path, fake_runner({"ar": "ok"}, extra_events=[unreachable], status="failed", rc=4))
    assert o.exit_code == 2 and "gpu2 unreachable: ssh: connect timed out" in o.message


PAIR_EVENTS = REPO / "tests" / "fixtures" / "runner_events" / "bench_simpair_drop.json"
PAIR_INVENTORY = {
    "_meta": {"hostvars": {h: {"ansible_host": f"sglbench-{h}"} for h in ("simhost-a", "simhost-b")}},
    "sglang_gpu": {"hosts": ["simhost-a", "simhost-b"]},
}


def test_two_hosts_each_locked_one_drops_out_the_other_is_recorded(tmp_path: Path) -> None:
    """The recorded two-host stream (simhost-b killed mid-point) under a fake ansible-runner that writes
    what the playbook wrote: both hosts locked while it runs, the drop recorded in run.json, exit 2."""
    held: list[bool] = []
    locks = tmp_path / "locks"

    def run(**kw: Any) -> FakeResult:
        root, run_id = Path(kw["extravars"]["sglbench_results_dir"]), kw["extravars"]["run_id"]
        held.extend(not lock.probe_free(locks / f"sglbench-{h}.lock") for h in ("simhost-a", "simhost-b"))
        for cfg, algo in (("qwen3-8b-ar", "none"), ("qwen3-8b-dflash", "DFLASH")):
            bench = rf.bench([rf.point(1, r, 10.0) for r in range(2)])
            rec = rf.record(run_id=run_id, host="simhost-a", config=cfg, algorithm=algo, benchmark=bench)
            rf.write(root, rec)
        rf.cut_attempt(root, run_id, "simhost-b", "qwen3-8b-ar-tp1")
        for e in json.loads(PAIR_EVENTS.read_text()):
            kw["event_handler"](e)
        return FakeResult("failed", 4)

    lines: list[str] = []
    o = runner.run_campaign(
        _opts(tmp_path), runner_fn=run, inventory_fn=lambda _o: PAIR_INVENTORY, out=lines.append
    )
    assert held == [True, True]
    assert all(lock.probe_free(f) for f in locks.glob("*.lock")) and len(list(locks.glob("*.lock"))) == 2
    assert o.exit_code == 2 and o.message.startswith("simhost-b unreachable: Task failed")
    assert any(x.startswith("simhost-a: [2/2] TP1 qwen3-8b-dflash-tp1 recorded") for x in lines)
    assert any(x.startswith("simhost-b: [1/2] TP1 qwen3-8b-ar-tp1 unreachable") for x in lines)
    meta = json.loads((o.run_dir / "_runner" / "run.json").read_text())
    assert meta["status"] == "incomplete" and meta["exit_code"] == 2  # resumable: nothing done is lost
    (gone,) = meta["dropped"]
    assert (gone["host"], gone["phase"], gone["instance"], gone["not_started"]) == (
        "simhost-b",
        "benchmark",
        "qwen3-8b-ar-tp1",
        ["qwen3-8b-dflash-tp1"],
    )
    res = results.load(o.run_dir)
    assert res.hosts == ["simhost-a", "simhost-b"] and list(res.attempts["host"].unique()) == ["simhost-a"]
    assert res.cut[["host", "instance", "phase", "points_committed"]].values.tolist() == [
        ["simhost-b", "qwen3-8b-ar-tp1", "benchmark", 1]
    ]


def test_a_run_without_dropped_hosts_says_so(tmp_path: Path) -> None:
    o = _run(tmp_path, fake_runner({"ar": "ok"}))
    assert json.loads((o.run_dir / "_runner" / "run.json").read_text())["dropped"] == []


def test_failed_preflight_exits_2(tmp_path: Path) -> None:
    bad = _ev(
        "runner_on_failed",
        "gpu1",
        "preflight | Check the matrix (names, ports, TP sizes, draft paths, value ranges)",
        {"msg": "Bad SGLang matrix: tp 3 does not divide 8"},
        role="sglang_preflight",
    )
    o = _run(tmp_path, fake_runner({}, extra_events=[bad], status="failed", rc=2, write=False))
    assert o.exit_code == 2 and "tp 3 does not divide 8" in o.message


def test_no_record_written_exits_2(tmp_path: Path) -> None:
    o = _run(tmp_path, fake_runner({"ar": "ok"}, status="failed", rc=2, write=False))
    assert o.exit_code == 2 and "no record was written" in o.message


def test_missing_attempt_exits_1() -> None:
    from sglbench import events

    st = events.fold(_units("gpu1", ["a", "b"]))
    st = events.apply_event(st, _ev("runner_on_ok", "gpu1", "cycle | Report a-tp1", {"msg": "a-tp1: ok"}))
    assert runner.decide_exit("successful", 0, st, [{"outcome": "ok", "valid": True}]) == 1
    st = events.apply_event(st, _ev("runner_on_ok", "gpu1", "cycle | Report b-tp1", {"msg": "b-tp1: ok"}))
    assert runner.decide_exit("successful", 0, st, [{"outcome": "ok"}, {"outcome": "ok"}]) == 0
    assert (
        runner.decide_exit("successful", 0, st, [{"outcome": "ok"}, {"outcome": "ok", "valid": False}]) == 1
    )


def test_busy_host_exits_2_naming_the_holder(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from sglbench.lock import HostLock
        lk = HostLock("10.0.0.1", {str(tmp_path / "locks")!r}, command="sglbench run --tp 8")
        lk.acquire(); print("held", flush=True); sys.stdin.read()
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        calls: list[dict] = []
        with pytest.raises(runner.LockBusy, match=r"10\.0\.0\.1 is busy: held by .*sglbench run --tp 8"):
            _run(tmp_path, fake_runner({"ar": "ok"}, calls=calls))
        assert calls == []  # the playbook never started
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(10)


def test_interrupted_run_is_resumed_unless_fresh(tmp_path: Path) -> None:
    first = _run(tmp_path, fake_runner({"ar": "ok"}))
    meta = first.run_dir / "_runner" / "run.json"
    data = json.loads(meta.read_text())
    data["status"] = "running"  # as if killed
    meta.write_text(json.dumps(data))
    again = _run(tmp_path, fake_runner({"ar": "ok"}))
    assert again.run_id == first.run_id
    assert len(list((first.run_dir / "_runner").glob("run.json"))) == 1
    fresh = _run(tmp_path, fake_runner({"ar": "ok"}), fresh=True)
    assert fresh.run_id != first.run_id
    assert runner.build_extravars(_opts(tmp_path, fresh=True), "x")["sglbench_fresh"] is True


def test_gpu_hosts_walks_children() -> None:
    assert runner.gpu_hosts(INVENTORY) == {"gpu1": "10.0.0.1", "gpu2": "gpu2"}
    assert runner.gpu_hosts({"_meta": {}}) == {}


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--tp", "four", "--lock-dir", str(tmp_path)]) == 2
    assert "--tp 'four'" in capsys.readouterr().err
    assert cli.main(["run", "--inventory", str(tmp_path / "nope.yml"), "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "Traceback" not in err
    bad = tmp_path / "inv.yml"
    bad.write_text("all:\n  hosts:\n    other: {}\n")
    assert (
        cli.main(["run", "--inventory", str(bad), "--results", str(tmp_path), "--lock-dir", str(tmp_path)])
        == 2
    )
    assert "no hosts in group sglang_gpu" in capsys.readouterr().err


def test_cli_end_to_end_with_fake_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "load_inventory", lambda _o: INVENTORY)
    args = cli.build_parser().parse_args(
        ["run", "--tp", "1", "--results", str(tmp_path / "r"), "--lock-dir", str(tmp_path / "l")]
    )
    code = runner.run_cli(args, runner_fn=fake_runner({"ar": "ok", "oom": "failed"}))
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "gpu1: oom-tp1: failed" in out and "## TP 1" in out and "failed: cuda_oom" in out and "exit 1" in out
    )


# -- one real run against the sim host ------------------------------------------------------------------
# One container per test process, so concurrent test runs never remove each other's sim host.
SIM_NAME = f"sglbench-simhost-runtest-{os.getpid()}"


@pytest.mark.simhost
def test_real_run_against_the_sim_host(tmp_path: Path) -> None:
    image = os.environ.get("SGLBENCH_SIMHOST_IMAGE")
    if not image:
        pytest.skip("SGLBENCH_SIMHOST_IMAGE is not set (make test sets it after building the sim host image)")
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    env = {**os.environ, "SGLBENCH_SIMHOST_NAME": SIM_NAME}
    up = subprocess.run(
        [str(REPO / "scripts" / "simhost.sh"), "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert up.returncode == 0, f"could not start the sim host {SIM_NAME}: {up.stderr.strip()[-600:]}"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sglbench",
                "run",
                "--inventory",
                str(REPO / "inventory" / "sim"),
                "--tp",
                "1",
                "--configs",
                "qwen3-8b-ar,qwen27b-dflash-mrr8",
                "--results",
                str(tmp_path / "results"),
                "--lock-dir",
                str(tmp_path / "locks"),
                "--policy",
                "force",
                "-e",
                f"ansible_host={SIM_NAME}",
            ],
            cwd=REPO,
            env={**env, "PYTHONPATH": str(REPO / "python")},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    finally:
        subprocess.run(
            [str(REPO / "scripts" / "simhost.sh"), "down"],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    # live progress: both attempts, with N of M and ETA, and the final summary labelled simulated
    assert "simhost: [1/2] TP1" in out and "simhost: [2/2] TP1" in out and "ETA" in out
    assert "SIMULATED" in out and "## TP 1" in out
    runs = list((tmp_path / "results").iterdir())
    assert len(runs) == 1
    recs = sorted(p.parent.name for p in runs[0].glob("simhost/*/record.json"))
    assert recs == ["qwen27b-dflash-mrr8-tp1", "qwen3-8b-ar-tp1"]
    assert list((runs[0] / "_runner" / "artifacts").glob("invocation-*/job_events/*.json"))
    # the deliberately failing config makes the exit code 1 when it did not start
    if "qwen27b-dflash-mrr8-tp1: ok" not in out:
        assert proc.returncode == 1
    # a published Qwen3 launch line (reasoning/tool-call parsers, watchdog): checked against the
    # impersonated release, planned as not affecting capacity, started and benchmarked
    rec = json.loads((runs[0] / "simhost" / "qwen3-8b-ar-tp1" / "record.json").read_text())
    assert rec["outcome"] == "ok", rec.get("outcome")
    published = "--reasoning-parser qwen3 --tool-call-parser qwen25 --watchdog-timeout 600"
    assert published in " ".join(rec["argv"])
    assert rec["plan"]["sglang_release"] == "0.5.23+ddtree"
    effect = rec["plan"]["flags_effect"]["none"]
    assert {"--reasoning-parser", "--tool-call-parser", "--watchdog-timeout"} <= set(effect)
    assert list((runs[0] / "simhost" / "qwen3-8b-ar-tp1" / "points").glob("*.json"))


# -- one campaign per host for real, resumable after failures, secrets kept off argv --------------
def _hold_run(
    run_dir: Path, host_lock_dir: Path | None = None, host: str = "10.0.0.1"
) -> subprocess.Popen[str]:
    """A live owner of ``run_dir`` (its run lock; with ``host_lock_dir`` also that host's lock), until stdin
    closes; on release it marks the run finished, as a campaign that ends does."""
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from sglbench.lock import HostLock, RunLock
        run = Path({str(run_dir)!r})
        locks = []
        if {str(host_lock_dir) if host_lock_dir else ""!r}:
            lk = HostLock({host!r}, {str(host_lock_dir)!r}, command="sglbench run --configs a")
            lk.acquire(); locks.append(lk)
        rl = RunLock(run / "_runner" / "run.lock"); assert rl.try_acquire()
        print("held", flush=True); sys.stdin.read()
        meta = json.loads((run / "_runner" / "run.json").read_text()); meta["status"] = "finished"
        (run / "_runner" / "run.json").write_text(json.dumps(meta))
        rl.release()
        for lk in locks: lk.release()
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def _mark(run_dir: Path, **kw: Any) -> None:
    meta_path = run_dir / "_runner" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta.update(kw)
    meta_path.write_text(json.dumps(meta))


def test_wait_never_merges_into_a_live_campaign(tmp_path: Path) -> None:
    """Defect 2: `run --wait` used to pick the live campaign's run directory before taking the lock."""
    first = _run(tmp_path, fake_runner({"a": "ok"}))
    _mark(first.run_dir, status="running", pid=12345)  # campaign A is live: it holds its host and its run
    owner = _hold_run(first.run_dir, tmp_path / "locks")
    lines: list[str] = []
    try:

        def release_soon() -> None:
            # once B says it waits for the host (whatever the machine's speed), A ends: marks its run
            # finished, unlocks
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any("waiting up to" in line for line in lines):
                time.sleep(0.05)
            owner.stdin.close()  # type: ignore[union-attr]

        t = threading.Thread(target=release_soon)
        t.start()
        second = _run(tmp_path, fake_runner({"b": "ok"}), lines, wait_s=30)
        t.join()
    finally:
        owner.wait(10)
    assert second.run_id != first.run_id, lines  # decided under the lock: A had finished by then
    assert any("waiting up to 30 s for GPU host 10.0.0.1" in line for line in lines)
    assert json.loads((first.run_dir / "_runner" / "run.json").read_text())["status"] == "finished"


def test_a_run_whose_owner_is_alive_is_never_resumed(tmp_path: Path) -> None:
    """A live run of other hosts (other locks) sharing the results root is not joined."""
    first = _run(tmp_path, fake_runner({"a": "ok"}))
    _mark(first.run_dir, status="running")
    owner = _hold_run(first.run_dir)  # alive, holding its run lock
    try:
        again = _run(tmp_path, fake_runner({"a": "ok"}))
        assert again.run_id != first.run_id
        with pytest.raises(runner.RunError, match=r"--run-id .*in use by another sglbench run"):
            _run(tmp_path, fake_runner({"a": "ok"}), run_id=first.run_id)
    finally:
        owner.stdin.close()  # type: ignore[union-attr]
        owner.wait(10)


def test_only_runs_of_the_same_hosts_are_resumed(tmp_path: Path) -> None:
    first = _run(tmp_path, fake_runner({"a": "ok"}))
    _mark(first.run_dir, status="running", hosts={"other": "10.9.9.9"})
    assert _run(tmp_path, fake_runner({"a": "ok"})).run_id != first.run_id


def test_interrupted_run_stops_the_units_and_stays_resumable(tmp_path: Path) -> None:
    """Defect 4: Ctrl-C marked the run finished (never resumed). Now: exit 130, status interrupted."""
    inner = fake_runner({"a": "ok"}, write=False)

    def interrupted(**kw: Any) -> FakeResult:
        inner(**kw)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the playbook runs: our handler, no exception
        return FakeResult("failed", 143)

    lines: list[str] = []
    first = _run(tmp_path, interrupted, lines)
    assert first.exit_code == runner.EXIT_INTERRUPTED and "stays resumable" in first.message
    assert any("SIGINT: ending the playbook, then stopping every SGLang unit" in line for line in lines)
    meta = json.loads((first.run_dir / "_runner" / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["exit_code"] == 130
    assert _run(tmp_path, fake_runner({"a": "ok"})).run_id == first.run_id  # resumed


def test_results_disk_full_exits_2_naming_the_cause(tmp_path: Path) -> None:
    """Defect 7: ENOSPC in the record step is 'could not proceed' (2), and the run stays resumable."""
    full = _ev(
        "runner_on_failed",
        "gpu1",
        "cycle | Write the record, unit and journal of b-tp1",
        {"msg": "results could not be written on the controller: /r/x/record.json: No space left on device"},
    )
    full["event_data"]["task_action"] = "sglbench_record"
    o = _run(tmp_path, fake_runner({"a": "ok"}, extra_events=[full], status="failed", rc=2))
    assert o.exit_code == 2 and "No space left on device" in o.message
    assert "the server was stopped first" in o.message
    meta = json.loads((o.run_dir / "_runner" / "run.json").read_text())
    assert meta["status"] == "incomplete"


def test_enospc_writing_run_json_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "load_inventory", lambda _o: INVENTORY)

    def full(path: Path, data: dict) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(runner, "_write_json", full)
    args = cli.build_parser().parse_args(
        ["run", "--results", str(tmp_path / "r"), "--lock-dir", str(tmp_path / "l")]
    )
    assert runner.run_cli(args, runner_fn=fake_runner({"a": "ok"})) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra",
    [
        "sglbench_api_key=K3Y",
        "sglbench_hf_token=hf_x",
        'sglbench_bench={"api_key": "x"}',
        "anything=hf_abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_secrets_on_the_command_line_are_refused(
    extra: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 5: `-e sglbench_api_key=...` landed in argv (ps), the 0644 lock file and run.json."""
    argv = ["run", "--results", str(tmp_path), "--lock-dir", str(tmp_path / "l"), "-e", extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "secrets may not be passed on the command line" in err
    assert not (tmp_path / "l").exists()  # refused before any lock file was written


def test_lock_file_and_run_json_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["sglbench", "run", "--api-key=abc", "-e", "x_token=hf_abc"])
    o = _run(tmp_path, fake_runner({"a": "ok"}))
    meta = (o.run_dir / "_runner" / "run.json").read_text()
    assert "abc" not in meta and "<redacted>" in meta
    assert lock.HostLock("h", tmp_path).command == "sglbench run --api-key=<redacted> -e x_token=<redacted>"


@pytest.mark.parametrize("broken", ["hosts.yml", "group_vars/sglang_gpu/host.yml"])
def test_a_yaml_error_in_the_inventory_is_named_not_no_hosts(
    broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 10: a YAML error in the inventory read as "no hosts in group sglang_gpu"."""
    inv = tmp_path / "inv"
    (inv / "group_vars" / "sglang_gpu").mkdir(parents=True)
    (inv / "hosts.yml").write_text("all:\n  children:\n    sglang_gpu:\n      hosts:\n        gpu1: {}\n")
    (inv / "group_vars" / "sglang_gpu" / "host.yml").write_text("sglbench_gpu_count: 8\n")
    (inv / broken).write_text("key: [unclosed\n")
    argv = [
        "run",
        "--inventory",
        str(inv),
        "--results",
        str(tmp_path / "r"),
        "--lock-dir",
        str(tmp_path / "l"),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be read: YAML parsing failed" in err, err
    assert f"{inv / broken}:2:1" in err and "no hosts in group" not in err


def test_an_unreachable_host_in_a_loop_names_the_cause_not_all_items_completed() -> None:
    """Defect 10: the failure of a loop task read "All items completed"."""
    from sglbench import events

    res = {
        "msg": "All items completed",
        "unreachable": True,
        "results": [
            {"item": "a", "changed": False},
            {"item": "b", "unreachable": True, "msg": "Failed to connect to the host via ssh: timed out"},
        ],
    }
    st = events.apply_event(events.Progress(), _ev("runner_on_unreachable", "gpu1", "units | Install", res))
    assert events.failure_kind(st) == "gpu1 unreachable: Failed to connect to the host via ssh: timed out"


def test_an_oserror_inside_ansible_runner_is_one_line_and_the_run_stays_resumable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-runner writing its event files on a full results disk raises out of it."""
    monkeypatch.setattr(runner, "load_inventory", lambda _o: INVENTORY)

    def full(**kw: Any) -> FakeResult:
        raise OSError(errno.ENOSPC, "No space left on device")

    args = cli.build_parser().parse_args(
        ["run", "--results", str(tmp_path / "r"), "--lock-dir", str(tmp_path / "l")]
    )
    assert runner.run_cli(args, runner_fn=full) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "resumes" in err
    (run,) = (tmp_path / "r").iterdir()
    assert json.loads((run / "_runner" / "run.json").read_text())["status"] == "incomplete"


def test_the_run_summary_puts_the_deploy_table_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = rf.demo_campaign(tmp_path, tps=(1,), concurrencies=(1, 4))
    runner._print_summary(run)
    out = capsys.readouterr().out
    assert out.index("## Deployment answer") < out.index("### TP 1: deploy table") < out.index("## TP 1")
    assert all((run / f).is_file() for f in ("breakeven.json", "frontier.json", "limits.json"))
