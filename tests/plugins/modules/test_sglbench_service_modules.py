"""sglbench_wait_ready, sglbench_journal, sglbench_server_info, sglbench_gpu_free: main() end to end
with systemctl/journalctl/nvidia-smi/HTTP replaced by fakes."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
import sglbench_gpu_free
import sglbench_journal
import sglbench_server_info
import sglbench_wait_ready
from ansible.module_utils.basic import AnsibleModule

from sglbench.hostlib import server_api, systemd_unit

SHOW = {
    "running": "ActiveState=active\nSubState=running\nResult=success\nInvocationID=inv1\nMainPID=42\n"
    "ExecMainCode=0\nExecMainStatus=0\nExecMainStartTimestampMonotonic=1000000\nExecMainExitTimestampMonotonic=0\n",
    "died": "ActiveState=activating\nSubState=start-post\nResult=success\nInvocationID=inv1\nMainPID=0\n"
    "ExecMainCode=1\nExecMainStatus=1\nExecMainStartTimestampMonotonic=1000000\n"
    "ExecMainExitTimestampMonotonic=2000000\n",
}


def fake_commands(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]) -> list[list[str]]:
    """Replace AnsibleModule.run_command: the first word of argv picks the output."""
    calls: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        calls.append(list(argv))
        return 0, outputs.get(argv[0], ""), ""

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


def test_journal_reads_one_invocation_in_full_and_classifies(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "\n".join(json.dumps(e) for e in JOURNAL)
    calls = fake_commands(monkeypatch, {"systemctl": SHOW["died"], "journalctl": text})
    monkeypatch.setattr(sglbench_journal.time, "sleep", lambda s: None)
    done = run_module(
        sglbench_journal,
        {
            "unit": "sglang-a.service",
            "invocation_id": "inv1",
            "wait_outcome": "unit_ended",
            "redact": ["sk-123"],
        },
    )
    assert not done.failed
    assert done.result["cause"] == "zero_requests"
    assert any("max_running_request is zero" in line for line in done.result["cause_lines"])
    assert done.result["entries"] == 4
    assert "sk-123" not in done.result["journal"] and "<redacted>" in done.result["journal"]
    assert done.result["journal"].count("\n") == 4
    reads = [c for c in calls if c[0] == "journalctl" and "--sync" not in c]
    assert reads and all("_SYSTEMD_INVOCATION_ID=inv1" in c for c in reads)


def test_journal_of_a_healthy_start_has_no_cause(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    ok = [dict(JOURNAL[0]), {**JOURNAL[0], "MESSAGE": "The server is fired up and ready to roll!"}]
    fake_commands(
        monkeypatch, {"systemctl": SHOW["running"], "journalctl": "\n".join(json.dumps(e) for e in ok)}
    )
    monkeypatch.setattr(sglbench_journal.time, "sleep", lambda s: None)
    done = run_module(sglbench_journal, {"unit": "sglang-a.service"})
    assert done.result["cause"] is None
    assert done.result["invocation_id"] == "inv1"  # the unit's current one
    assert done.result["startup"]["ready"] is True
    assert done.result["ready_logged_at"] == pytest.approx(0.001)


def test_journal_timeout_without_log_evidence_is_a_readiness_timeout(run_module, monkeypatch) -> None:
    fake_commands(monkeypatch, {"systemctl": SHOW["running"], "journalctl": json.dumps(JOURNAL[0])})
    monkeypatch.setattr(sglbench_journal.time, "sleep", lambda s: None)
    done = run_module(sglbench_journal, {"unit": "sglang-a.service", "wait_outcome": "timeout"})
    assert done.result["cause"] == "readiness_timeout"


def test_server_info_is_normalised_and_secret_free(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = {
        "api_key": "sk-1",
        "max_total_num_tokens": 5,
        "internal_states": [{"effective_max_running_requests_per_dp": 2}],
    }
    monkeypatch.setattr(
        sglbench_server_info, "fetch_server_info", lambda url, t, key: ("/get_server_info", payload)
    )
    done = run_module(sglbench_server_info, {"url": "http://127.0.0.1:1", "api_key": "sk-1"})
    info = done.result["server_info"]
    assert info["endpoint"] == "/get_server_info"
    assert info["max_total_num_tokens"] == 5 and info["effective_max_running_requests"] == 2
    assert "sk-1" not in json.dumps(done.result)


def test_server_info_failure_names_the_url(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(url: str, t: float, key: str | None) -> Any:
        raise server_api.ServerApiError(f"no answer from {url}")

    monkeypatch.setattr(sglbench_server_info, "fetch_server_info", boom)
    done = run_module(sglbench_server_info, {"url": "http://127.0.0.1:9"})
    assert done.failed and "http://127.0.0.1:9" in done.result["msg"]


class FakeGpus:
    """nvidia-smi output that changes when processes are signalled."""

    def __init__(self, holders: dict[int, str], die_on: int = signal.SIGTERM) -> None:
        self.holders = dict(holders)  # pid -> cmdline
        self.die_on = die_on
        self.signals: list[tuple[int, int]] = []
        self.roots: dict[int, int] = {}  # worker pid -> server main pid

    def smi(self, argv: list[str], timeout: float = 20.0) -> str:
        if argv[1].startswith("--query-gpu"):
            used = 40000 * len(self.holders)
            return f"0, GPU-a, RTX, {used}, 97887\n1, GPU-b, RTX, 0, 97887\n"
        return "".join(f"{pid}, GPU-a, 40000, python3\n" for pid in self.holders)

    def kill(self, pid: int, sig: int) -> bool:
        self.signals.append((pid, sig))
        if sig == self.die_on or sig == signal.SIGKILL:
            self.holders.pop(pid, None)
        return True


def patch_gpus(monkeypatch: pytest.MonkeyPatch, fake: FakeGpus) -> None:
    monkeypatch.setattr(sglbench_gpu_free, "run_nvidia_smi", fake.smi)
    monkeypatch.setattr(sglbench_gpu_free, "read_cmdline", lambda pid: fake.holders.get(pid, ""))
    monkeypatch.setattr(sglbench_gpu_free, "signal_pid", fake.kill)
    monkeypatch.setattr(sglbench_gpu_free, "server_root", lambda pid, match: fake.roots.get(pid, pid))
    monkeypatch.setattr(sglbench_gpu_free.time, "sleep", lambda s: None)


def test_gpu_free_when_nothing_holds_them(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({}))
    done = run_module(sglbench_gpu_free, {"gpus": [0, 1]})
    assert not done.failed and done.result["free"] and not done.result["changed"]
    assert done.result["killed"] == [] and fake.signals == []


def test_gpu_free_kills_a_leftover_sglang_worker_and_reports_it(run_module, monkeypatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({77: "python3 -m sglang.launch_server --port 31999"}))
    done = run_module(sglbench_gpu_free, {"gpus": [0], "grace": 0, "timeout": 30})
    assert not done.failed and done.result["free"] and done.result["changed"]
    assert fake.signals == [(77, signal.SIGTERM)]
    assert done.result["killed"][0]["pid"] == 77 and "31999" in done.result["killed"][0]["cmdline"]
    assert "pid 77" in done.result["report"]


def test_gpu_free_escalates_to_sigkill(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({77: "python3 -m sglang.launch_server"}, die_on=signal.SIGKILL))
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(sglbench_gpu_free.time, "monotonic", lambda: float(next(clock)))
    done = run_module(sglbench_gpu_free, {"gpus": [0], "grace": 0, "kill_grace": 2, "timeout": 100})
    assert done.result["free"]
    assert [s for _, s in fake.signals] == [signal.SIGTERM, signal.SIGKILL]


def test_gpu_free_never_kills_foreign_processes_and_fails_with_a_report(run_module, monkeypatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({55: "/usr/bin/someone-elses-job"}))
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(sglbench_gpu_free.time, "monotonic", lambda: float(next(clock)))
    done = run_module(sglbench_gpu_free, {"gpus": [0], "grace": 0, "timeout": 5})
    assert done.failed and fake.signals == []
    assert "GPUs [0] still busy" in done.result["msg"]
    assert "pid 55 (/usr/bin/someone-elses-job) holds 40000 MiB on GPU 0" in done.result["msg"]
    assert "Not killed" in done.result["msg"]


def test_gpu_free_in_check_mode_only_reports(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({77: "python3 -m sglang.launch_server"}))
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(sglbench_gpu_free.time, "monotonic", lambda: float(next(clock)))
    done = run_module(sglbench_gpu_free, {"gpus": [0], "grace": 0, "timeout": 3}, check_mode=True)
    assert done.failed and fake.signals == []


def test_unit_state_helper_matches_module_view() -> None:
    assert systemd_unit.unit_state_from_props("x", systemd_unit.parse_show(SHOW["died"])).ended


def test_gpu_free_stops_the_leftover_server_whole(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_gpus(monkeypatch, fake := FakeGpus({78: "python3 -m sglang.launch_server --port 31999"}))
    fake.roots[78] = 70
    done = run_module(sglbench_gpu_free, {"gpus": [0], "grace": 0})
    assert fake.signals[:2] == [(70, signal.SIGTERM), (78, signal.SIGTERM)]
    assert [k["pid"] for k in done.result["killed"]] == [70, 78]
    assert done.result["killed"][0]["holder_pid"] == 78
