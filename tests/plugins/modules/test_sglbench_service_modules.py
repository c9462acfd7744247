"""sglbench_wait_ready (start, health, probe) and sglbench_stop (journal, guard, target, GPUs): main() end
to end with systemctl/journalctl/nvidia-smi/HTTP replaced by fakes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sglbench_stop
import sglbench_wait_ready
from ansible.module_utils.basic import AnsibleModule

from sglbench.hostlib import gpu_free, server_api, systemd_unit

SHOW = {
    "running": "ActiveState=active\nSubState=running\nResult=success\nInvocationID=inv1\nMainPID=42\n"
    "ExecMainCode=0\nExecMainStatus=0\nExecMainStartTimestampMonotonic=1000000\nExecMainExitTimestampMonotonic=0\n",
    "died": "ActiveState=activating\nSubState=start-post\nResult=success\nInvocationID=inv1\nMainPID=0\n"
    "ExecMainCode=1\nExecMainStatus=1\nExecMainStartTimestampMonotonic=1000000\n"
    "ExecMainExitTimestampMonotonic=2000000\n",
}


def fake_commands(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, Any]) -> list[list[str]]:
    """Replace AnsibleModule.run_command: the longest key that argv (joined by spaces) starts with picks
    the output, a string (rc 0) or an (rc, stdout, stderr) tuple."""
    calls: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        calls.append(list(argv))
        line = " ".join(argv)
        keys = sorted((k for k in outputs if line.startswith(k)), key=len, reverse=True)
        out = outputs[keys[0]] if keys else ""
        return out if isinstance(out, tuple) else (0, out, "")

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    return calls


def test_wait_ready_reports_ready(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_commands(monkeypatch, {"systemctl": SHOW["running"]})
    statuses = iter([None, 503, 200])
    monkeypatch.setattr(sglbench_wait_ready, "http_status", lambda url, t: next(statuses))
    monkeypatch.setattr(sglbench_wait_ready.time, "sleep", lambda s: None)
    done = run_module(sglbench_wait_ready, {"unit": "sglang-a-tp1.service", "url": "http://127.0.0.1:30000"})
    assert not done.failed
    assert done.result["ready"] is True and done.result["outcome"] == "ready"
    assert done.result["polls"] == 3 and done.result["http_statuses"] == {"None": 1, "503": 1, "200": 1}
    assert done.result["invocation_id"] == "inv1"
    assert done.result["url"] == "http://127.0.0.1:30000/health_generate"
    assert done.result["changed"] is False


def test_wait_ready_fails_at_once_when_the_server_died(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_commands(monkeypatch, {"systemctl": SHOW["died"]})
    probes: list[str] = []
    monkeypatch.setattr(sglbench_wait_ready, "http_status", lambda url, t: probes.append(url))
    done = run_module(
        sglbench_wait_ready, {"unit": "sglang-a-tp1.service", "url": "http://127.0.0.1:1", "timeout": 900}
    )
    assert done.failed
    assert done.result["outcome"] == "unit_ended" and probes == []
    assert "sglang-a-tp1.service ended while starting" in done.result["msg"]
    assert "status 1" in done.result["msg"]
    assert done.result["unit_state"]["exec_main_status"] == 1
    assert done.result["exited_at"] is not None


def test_wait_ready_starts_the_unit_first_then_reads_the_ready_servers_facts(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_commands(monkeypatch, {"systemctl": SHOW["running"]})
    statuses = iter([503, 200])
    monkeypatch.setattr(sglbench_wait_ready, "http_status", lambda url, t: next(statuses))
    monkeypatch.setattr(sglbench_wait_ready.time, "sleep", lambda s: None)
    payload = {
        "api_key": "sk-1",
        "max_total_num_tokens": 5,
        "internal_states": [{"effective_max_running_requests_per_dp": 2}],
    }
    asked: list[tuple[str, str | None]] = []

    def fetch(url: str, t: float, key: str | None) -> tuple[str, dict[str, Any]]:
        asked.append((url, key))
        return "/get_server_info", payload

    monkeypatch.setattr(sglbench_wait_ready, "fetch_server_info", fetch)
    args = {"unit": "sglang-a-tp1.service", "url": "http://127.0.0.1:30000", "start": True}
    done = run_module(sglbench_wait_ready, {**args, "server_info": True, "api_key": "sk-1"})
    assert not done.failed and done.result["changed"] is True and done.result["ready"] is True
    assert calls[0] == ["systemctl", "start", "--no-block", "sglang-a-tp1.service"]
    assert calls[1][:2] == ["systemctl", "show"]  # the wait watches the start it queued
    assert asked == [("http://127.0.0.1:30000", "sk-1")]
    info = done.result["server_info"]
    assert info["endpoint"] == "/get_server_info"
    assert info["max_total_num_tokens"] == 5 and info["effective_max_running_requests"] == 2
    assert "sk-1" not in json.dumps(done.result)
    entered = done.result["phases_entered_s"]
    assert set(entered) == {"health", "probe"} and 0 <= entered["health"] <= entered["probe"]


def test_wait_ready_that_cannot_start_the_unit_fails_in_the_start_phase(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_commands(
        monkeypatch, {"systemctl start": (5, "", "Failed to start x.service: Unit x.service not found.")}
    )
    monkeypatch.setattr(sglbench_wait_ready, "http_status", lambda url, t: pytest.fail("probed"))
    done = run_module(sglbench_wait_ready, {"unit": "x.service", "url": "http://127.0.0.1:1", "start": True})
    assert done.failed and done.result["phases_entered_s"] == {}
    assert done.result["msg"] == (
        "cannot start x.service: systemctl start failed (rc=5): "
        "Failed to start x.service: Unit x.service not found."
    )


def test_wait_ready_of_a_server_that_died_reads_no_facts_and_fails_in_the_health_phase(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_commands(monkeypatch, {"systemctl": SHOW["died"]})
    monkeypatch.setattr(sglbench_wait_ready, "fetch_server_info", lambda *a: pytest.fail("probed"))
    args = {"unit": "a.service", "url": "http://127.0.0.1:1", "start": True, "server_info": True}
    done = run_module(sglbench_wait_ready, args)
    assert done.failed and done.result["outcome"] == "unit_ended"
    assert list(done.result["phases_entered_s"]) == ["health"]


def test_wait_ready_whose_server_info_fails_fails_in_the_probe_phase_naming_the_url(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_commands(monkeypatch, {"systemctl": SHOW["running"]})
    monkeypatch.setattr(sglbench_wait_ready, "http_status", lambda url, t: 200)

    def boom(url: str, t: float, key: str | None) -> Any:
        raise server_api.ServerApiError(f"no answer from {url}/server_info")

    monkeypatch.setattr(sglbench_wait_ready, "fetch_server_info", boom)
    args = {"unit": "a.service", "url": "http://127.0.0.1:9", "server_info": True}
    done = run_module(sglbench_wait_ready, args)
    assert done.failed and "http://127.0.0.1:9/server_info" in done.result["msg"]
    assert done.result["ready"] is True and list(done.result["phases_entered_s"]) == ["probe"]
    assert done.result["changed"] is False  # nothing was started


JOURNAL = [
    {"__REALTIME_TIMESTAMP": "1000", "SYSLOG_IDENTIFIER": "sglang-a", "_PID": "9",
     "MESSAGE": "[2026-11-29 10:00:00] Load weight begin. avail mem=94.24 GB"},
    {"__REALTIME_TIMESTAMP": "2000", "SYSLOG_IDENTIFIER": "sglang-a", "_PID": "9",
     "MESSAGE": "server_args=ServerArgs(api_key='sk-123')"},
    {"__REALTIME_TIMESTAMP": "3000", "SYSLOG_IDENTIFIER": "sglang-a", "_PID": "9",
     "MESSAGE": "AssertionError: max_running_request is zero"},
    {"__REALTIME_TIMESTAMP": "4000", "SYSLOG_IDENTIFIER": "systemd", "_PID": "1",
     "MESSAGE": "sglang-a.service: Main process exited, code=exited, status=1/FAILURE"},
]  # fmt: skip
TARGET = {
    "active": "Id=sglang.target\nLoadState=loaded\nActiveState=active\nSubState=active\n",
    "inactive": "Id=sglang.target\nLoadState=loaded\nActiveState=inactive\nSubState=dead\n",
    "absent": "Id=sglang.target\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n",
}


def each(one: Any) -> Any:
    """A fake of the side-by-side nvidia-smi runner from a fake of one query."""
    return lambda argvs: [one(a) for a in argvs]


@pytest.fixture
def no_gpus_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU 0 free at the first poll."""
    ops = gpu_free.HostOps(
        smi=each(lambda argv: "0, GPU-a, RTX, 0, 97887\n" if "--query-gpu" in argv[1] else "")
    )
    monkeypatch.setattr(sglbench_stop, "HOST_OPS", ops)


def stop_args(tmp_path: Any, **extra: Any) -> dict[str, Any]:
    return {"controller": "ctl-1", "guard_dir": str(tmp_path), **extra}


def test_stop_of_a_host_with_nothing_running_changes_nothing(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    calls = fake_commands(monkeypatch, {"systemctl show": TARGET["inactive"]})
    done = run_module(sglbench_stop, stop_args(tmp_path))
    assert not done.failed and done.result["free"] and done.result["changed"] is False
    assert done.result["journal"] is None and done.result["target_stopped"] is False
    assert done.result["target_stop_s"] is None  # no server stopped: no stop time of one
    assert done.result["guard"] == {"found": None, "killed": [], "freed": True}
    assert not any(c[:2] == ["systemctl", "stop"] for c in calls)


def test_stop_stops_an_active_target(run_module, monkeypatch, tmp_path, no_gpus_held) -> None:
    calls = fake_commands(monkeypatch, {"systemctl show": TARGET["active"]})
    done = run_module(sglbench_stop, stop_args(tmp_path))
    assert not done.failed and done.result["changed"] and done.result["target_stopped"]
    assert ["systemctl", "stop", "sglang.target"] in calls
    assert isinstance(done.result["target_stop_s"], float) and 0.0 <= done.result["target_stop_s"] < 5.0


def test_stop_of_a_host_without_the_target_still_checks_the_gpus(run_module, monkeypatch, tmp_path) -> None:
    fake_commands(monkeypatch, {"systemctl show": TARGET["absent"]})
    polls: list[str] = []

    def smi(argv: Any) -> str:
        polls.append(argv[1])
        return "0, GPU-a, RTX, 0, 97887\n" if "--query-gpu" in argv[1] else ""

    monkeypatch.setattr(sglbench_stop, "HOST_OPS", gpu_free.HostOps(smi=each(smi)))
    done = run_module(sglbench_stop, stop_args(tmp_path))
    assert not done.failed and done.result["target_stopped"] is False and polls


def test_stop_that_systemctl_refuses_fails_naming_the_target(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    fake_commands(
        monkeypatch,
        {"systemctl show": TARGET["active"], "systemctl stop": (1, "", "Job for sglang.target canceled.")},
    )
    done = run_module(sglbench_stop, stop_args(tmp_path))
    assert done.failed
    assert done.result["msg"] == "systemctl stop sglang.target failed (rc=1): Job for sglang.target canceled."


def test_stop_fails_with_the_gpu_report_when_they_stay_busy(run_module, monkeypatch, tmp_path) -> None:
    fake_commands(monkeypatch, {"systemctl show": TARGET["inactive"]})
    ticks = iter(range(10_000))
    ops = gpu_free.HostOps(
        smi=each(
            lambda argv: (
                "0, GPU-a, RTX, 40000, 97887\n" if "--query-gpu" in argv[1] else "55, GPU-a, 40000, job\n"
            )
        ),
        cmdline=lambda pid: "/usr/bin/someone-elses-job",
        clock=lambda: float(next(ticks)),
        sleep=lambda s: None,
    )
    monkeypatch.setattr(sglbench_stop, "HOST_OPS", ops)
    done = run_module(sglbench_stop, stop_args(tmp_path, gpus=[0], timeout=5))
    assert done.failed and done.result["free"] is False
    assert done.result["msg"].startswith(
        "GPUs [0] still busy after 5.0s: GPU 0: 40000 of 97887 MiB used; pid 55 (/usr/bin/someone-elses-job)"
    )


def test_stop_reads_the_journal_of_the_start_before_stopping_it(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    text = "\n".join(json.dumps(e) for e in JOURNAL)
    calls = fake_commands(
        monkeypatch,
        {"systemctl show": SHOW["died"], "journalctl": text},  # the unit's state, and the target's
    )
    monkeypatch.setattr(systemd_unit.time, "sleep", lambda s: None)
    journal = {
        "unit": "sglang-a.service",
        "invocation_id": "inv1",
        "wait_outcome": "unit_ended",
        "redact": ["sk-123"],
    }
    done = run_module(sglbench_stop, stop_args(tmp_path, journal=journal))
    assert not done.failed
    j = done.result["journal"]
    assert j["cause"] == "zero_requests" and j["invocation_id"] == "inv1" and j["unit"] == "sglang-a.service"
    assert any("max_running_request is zero" in line for line in j["cause_lines"])
    assert j["entries"] == 4 and j["journal"].count("\n") == 4
    assert j["unit_state"]["exec_main_status"] == 1 and j["startup"]["ready"] is False
    assert "sk-123" not in json.dumps(done.result) and "<redacted>" in j["journal"]
    reads = [i for i, c in enumerate(calls) if c[0] == "journalctl" and "--sync" not in c]
    assert len(reads) >= 2  # a server that exited: read until two reads agree
    assert all("_SYSTEMD_INVOCATION_ID=inv1" in calls[i] for i in reads)
    stops = [i for i, c in enumerate(calls) if c[:2] == ["systemctl", "stop"]]
    assert stops and max(reads) < stops[0]  # journal and unit state come before the stop


def test_stop_reads_a_running_servers_journal_once_and_finds_no_cause(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    ok = [dict(JOURNAL[0]), {**JOURNAL[0], "MESSAGE": "The server is fired up and ready to roll!"}]
    calls = fake_commands(
        monkeypatch,
        {"systemctl show": SHOW["running"], "journalctl": "\n".join(json.dumps(e) for e in ok)},
    )
    done = run_module(sglbench_stop, stop_args(tmp_path, journal={"unit": "sglang-a.service"}))
    j = done.result["journal"]
    assert j["cause"] is None and j["invocation_id"] == "inv1"  # the unit's current one
    assert j["startup"]["ready"] is True and j["ready_logged_at"] == pytest.approx(0.001)
    assert len([c for c in calls if c[0] == "journalctl" and "--sync" not in c]) == 1


def test_stop_journal_of_a_timed_out_start_without_log_evidence_is_a_readiness_timeout(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    fake_commands(monkeypatch, {"systemctl show": SHOW["running"], "journalctl": json.dumps(JOURNAL[0])})
    journal = {"unit": "sglang-a.service", "wait_outcome": "timeout"}
    done = run_module(sglbench_stop, stop_args(tmp_path, journal=journal))
    assert done.result["journal"]["cause"] == "readiness_timeout"


def test_unit_state_helper_matches_module_view() -> None:
    assert systemd_unit.unit_state_from_props("x", systemd_unit.parse_show(SHOW["died"])).ended


def test_a_journal_that_cannot_be_read_is_said_and_the_stop_still_runs(
    run_module, monkeypatch, tmp_path, no_gpus_held
) -> None:
    calls = fake_commands(
        monkeypatch,
        {"systemctl show": SHOW["running"], "journalctl --no-pager": (1, "", "Failed to open journal")},
    )
    done = run_module(sglbench_stop, stop_args(tmp_path, journal={"unit": "sglang-a.service"}))
    assert not done.failed and done.result["free"]
    j = done.result["journal"]
    assert j["error"] == "journalctl failed for invocation inv1 (rc=1): Failed to open journal"
    assert j["unit_state"]["active_state"] == "active" and "cause" not in j
    assert ["systemctl", "stop", "sglang.target"] in calls
