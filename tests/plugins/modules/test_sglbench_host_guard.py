"""The host-side guard : one benchmark per GPU host, only against the start of the unit
this campaign made; a dead campaign's client is ended by the next stop phase (sglbench_stop) of the same
controller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import sglbench_prompt_bench
import sglbench_stop
from ansible.module_utils.basic import AnsibleModule

from sglbench.hostlib import gpu_free, host_guard, nullserver, prompts, systemd_unit

REPO = Path(__file__).resolve().parents[3]
ME = host_guard.Campaign("run-b", "ctl-1")


def _holder_in_child(directory: Path, controller: str, run_id: str = "run-a") -> subprocess.Popen[str]:
    """An orphaned benchmark client: holds the bench lock like the module does, until killed."""
    code = textwrap.dedent(f"""
        import sys, time
        from sglbench.hostlib.host_guard import Campaign, bench_guard
        campaign = Campaign({run_id!r}, {controller!r})
        with bench_guard("sglang-a-tp1.service", "http://127.0.0.1:30000", campaign, {str(directory)!r}):
            print("held", flush=True)
            time.sleep(120)
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_second_benchmark_on_the_host_is_refused_naming_the_first(tmp_path: Path) -> None:
    child = _holder_in_child(tmp_path, "ctl-1")
    try:
        with (
            pytest.raises(host_guard.GuardRefused, match=r"another benchmark is running on this host \(pid"),
            host_guard.bench_guard("sglang-b-tp1.service", "http://127.0.0.1:30001", ME, str(tmp_path)),
        ):
            pass
        holder = host_guard.read_holder(host_guard.lock_path(str(tmp_path)))
        assert holder is not None and holder.pid == child.pid and holder.run_id == "run-a"
    finally:
        child.kill()
        child.wait(10)
    with host_guard.bench_guard("sglang-b-tp1.service", "u", ME, str(tmp_path)) as held:
        assert held.holder.pid == os.getpid() and held.takeover is None


def test_a_client_of_the_same_campaign_and_unit_is_ended_and_the_point_runs(tmp_path: Path) -> None:
    """A client whose connection dropped (same run, controller and unit) holds the lock while Ansible
    runs its point again: the guard ends it, takes the lock and says what it ended."""
    child = _holder_in_child(tmp_path, "ctl-1", run_id="run-b")
    try:
        with host_guard.bench_guard("sglang-a-tp1.service", "u", ME, str(tmp_path), grace_s=5) as held:
            assert child.wait(10) == -signal.SIGTERM
            assert held.holder.pid == os.getpid()
            assert held.takeover is not None and held.takeover.ended.pid == child.pid
            assert child.pid in held.takeover.killed
            noted = held.takeover.as_dict()
            assert noted["pid"] == child.pid and "connection to the controller was lost" in noted["reason"]
            owner = host_guard.read_holder(host_guard.lock_path(str(tmp_path)))
            assert owner is not None and owner.pid == os.getpid()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


@pytest.mark.parametrize(
    ("unit", "campaign"),
    [
        ("sglang-b-tp1.service", ME),  # another unit of this campaign
        ("sglang-a-tp1.service", host_guard.Campaign("run-c", "ctl-1")),  # another run of this controller
        ("sglang-a-tp1.service", host_guard.Campaign("run-b", "ctl-2")),  # the same run id elsewhere
        ("sglang-a-tp1.service", host_guard.Campaign("", "")),  # no campaign named: never a takeover
    ],
)
def test_only_a_client_of_the_same_campaign_and_unit_is_ended(
    tmp_path: Path, unit: str, campaign: host_guard.Campaign
) -> None:
    child = _holder_in_child(tmp_path, "ctl-1", run_id="run-b")
    try:
        with (
            pytest.raises(host_guard.GuardRefused, match=r"another benchmark is running on this host \(pid"),
            host_guard.bench_guard(unit, "u", campaign, str(tmp_path)),
        ):
            pass
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(10)


def test_the_guard_never_ends_its_own_process(tmp_path: Path) -> None:
    with (
        host_guard.bench_guard("sglang-a-tp1.service", "u", ME, str(tmp_path)),
        pytest.raises(host_guard.GuardRefused, match="another benchmark is running"),
        host_guard.bench_guard("sglang-a-tp1.service", "u", ME, str(tmp_path)),
    ):
        pass


def test_the_next_stop_of_the_same_controller_ends_an_orphaned_client(tmp_path: Path) -> None:
    child = _holder_in_child(tmp_path, "ctl-1")
    try:
        report = host_guard.clear_orphans(ME, str(tmp_path), grace_s=5)
        assert report.freed and child.pid in (report.killed or [])
        assert report.found is not None and report.found["run_id"] == "run-a"
        assert child.wait(10) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert host_guard.clear_orphans(ME, str(tmp_path)).as_dict() == {
        "found": None,
        "killed": [],
        "freed": True,
    }


def test_a_client_of_another_controller_is_never_killed(tmp_path: Path) -> None:
    child = _holder_in_child(tmp_path, "ctl-2")
    try:
        with pytest.raises(
            host_guard.GuardRefused, match=r"run run-a from controller ctl-2.*must not share a host"
        ):
            host_guard.clear_orphans(ME, str(tmp_path))
        assert child.poll() is None
    finally:
        child.kill()
        child.wait(10)


def test_a_server_another_campaign_restarted_is_not_benchmarked() -> None:
    host_guard.check_invocation("u", "inv1", "inv1")
    host_guard.check_invocation("u", "", "whatever")  # no expectation (plain module use)
    with pytest.raises(host_guard.GuardRefused, match="not the server this campaign started"):
        host_guard.check_invocation("sglang-a-tp1.service", "inv1", "inv2")


def test_the_stop_module_ends_our_orphan_and_refuses_anothers_before_stopping_anything(
    run_module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        commands.append(list(argv))
        return 0, "Id=sglang.target\nLoadState=loaded\nActiveState=active\n", ""

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    free = gpu_free.HostOps(
        smi=lambda argvs: ["0, GPU-a, RTX, 0, 97887\n" if "--query-gpu" in a[1] else "" for a in argvs]
    )
    monkeypatch.setattr(sglbench_stop, "HOST_OPS", free)
    args = {"controller": "ctl-1", "guard_dir": str(tmp_path)}
    done = run_module(sglbench_stop, args)
    assert not done.failed and done.result["guard"]["found"] is None
    child = _holder_in_child(tmp_path, "ctl-2")
    try:
        commands.clear()
        done = run_module(sglbench_stop, args)
        assert done.failed and "must not share a host" in done.result["msg"]
        assert not any(
            c[:2] == ["systemctl", "stop"] for c in commands
        )  # the other campaign's server runs on
    finally:
        child.kill()
        child.wait(10)
    child = _holder_in_child(tmp_path, "ctl-1")
    try:
        done = run_module(sglbench_stop, args, check_mode=True)
        assert (
            not done.failed and done.result["guard"]["killed"] == [] and child.poll() is None
        )  # report only
        done = run_module(sglbench_stop, {**args, "kill_grace": 5})
        assert not done.failed and done.result["changed"] and done.result["guard"]["freed"]
        assert child.pid in done.result["guard"]["killed"]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)


def _bench_args(url: str, tmp_path: Path, **guard: Any) -> dict[str, Any]:
    return {
        "url": url,
        "prompts": [p.to_param() for p in prompts.load_shipped_set("code")[:2]],
        "concurrency": [1],
        "num_prompts": 2,
        "max_new_tokens": 4,
        "repeats": 1,
        "warmup": 0,
        "guard": {"unit": "sglang-a-tp1.service", "run_id": "run-b", "controller": "ctl-1",
                  "dir": str(tmp_path), **guard},
    }  # fmt: skip


def test_prompt_bench_refuses_while_another_benchmark_runs(run_module, tmp_path: Path) -> None:
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=2)) as srv:
        done = run_module(sglbench_prompt_bench, _bench_args(srv.url, tmp_path))
        assert not done.failed, done.result  # alone on the host: it runs, and leaves the lock free
        assert not host_guard.lock_held(host_guard.lock_path(str(tmp_path)))
        child = _holder_in_child(tmp_path, "ctl-1")
        try:
            t0 = time.monotonic()
            done = run_module(sglbench_prompt_bench, _bench_args(srv.url, tmp_path))
            assert done.failed and done.result.get("guard") is True
            assert "refused: another benchmark is running on this host" in done.result["msg"]
            assert time.monotonic() - t0 < 5  # refused at once, no request sent
        finally:
            child.kill()
            child.wait(10)


def test_prompt_bench_ends_its_own_cut_off_client_and_says_so(
    run_module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point run again after a dropped connection: the earlier client of this campaign and unit is
    ended, the point is measured, and every point of the summary names what was ended."""
    warnings: list[str] = []
    monkeypatch.setattr(sglbench_prompt_bench.AnsibleModule, "warn", lambda _self, msg: warnings.append(msg))
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=2)) as srv:
        child = _holder_in_child(tmp_path, "ctl-1", run_id="run-b")
        try:
            done = run_module(sglbench_prompt_bench, _bench_args(srv.url, tmp_path))
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(10)
    assert not done.failed, done.result
    assert child.returncode == -signal.SIGTERM
    points = done.result["summary"]["points"]
    assert points and all(p["ended_client"]["pid"] == child.pid for p in points)
    assert [w for w in warnings if f"ended the earlier client (pid {child.pid} " in w], warnings
    assert not host_guard.lock_held(host_guard.lock_path(str(tmp_path)))


def test_prompt_bench_refuses_a_restarted_server(run_module, tmp_path: Path, monkeypatch) -> None:
    state = systemd_unit.unit_state_from_props("sglang-a-tp1.service", {"InvocationID": "inv-other"})
    monkeypatch.setattr(sglbench_prompt_bench, "read_unit_state", lambda unit: state)
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=2)) as srv:
        done = run_module(sglbench_prompt_bench, _bench_args(srv.url, tmp_path, invocation_id="inv-mine"))
    assert done.failed and "not the server this campaign started (invocation inv-other" in done.result["msg"]
    assert json.loads(Path(host_guard.lock_path(str(tmp_path))).read_text() or "null") is None  # released
