"""hostlib/gpu_free.py: waiting for free GPUs, killing leftover SGLang workers, on a fake nvidia-smi."""

from __future__ import annotations

import itertools
import signal
from dataclasses import replace

from sglbench.hostlib import gpu_free


class FakeGpus:
    """nvidia-smi output that changes when processes are signalled; a clock that ticks 1 s per read."""

    def __init__(self, holders: dict[int, str], die_on: int = signal.SIGTERM) -> None:
        self.holders = dict(holders)  # pid -> cmdline
        self.die_on = die_on
        self.signals: list[tuple[int, int]] = []
        self.roots: dict[int, int] = {}  # worker pid -> server main pid
        self.ticks = itertools.count()

    def smi(self, argv: object) -> str:
        assert isinstance(argv, list)
        if argv[1].startswith("--query-gpu"):
            used = 40000 * len(self.holders)
            return f"0, GPU-a, RTX, {used}, 97887\n1, GPU-b, RTX, 0, 97887\n"
        return "".join(f"{pid}, GPU-a, 40000, python3\n" for pid in self.holders)

    def kill(self, pid: int, sig: int) -> bool:
        self.signals.append((pid, sig))
        if sig in (self.die_on, signal.SIGKILL):
            self.holders.pop(pid, None)
        return True

    def ops(self) -> gpu_free.HostOps:
        return gpu_free.HostOps(
            smi=lambda argvs: [self.smi(a) for a in argvs],
            cmdline=lambda pid: self.holders.get(pid, ""),
            kill=self.kill,
            root=lambda pid, match: self.roots.get(pid, pid),
            clock=lambda: float(next(self.ticks)),
            sleep=lambda s: None,
        )


SPEC = gpu_free.FreeSpec(gpus=(0,), grace_s=0.0, timeout_s=30.0)


def test_free_gpus_are_free_at_once_and_nothing_is_signalled() -> None:
    fake = FakeGpus({})
    done = gpu_free.wait_free(replace(SPEC, gpus=(0, 1)), ops=fake.ops())
    assert done.free and fake.signals == [] and done.killed == []
    assert done.as_dict()["gpus"] == [
        {"index": 0, "used_mib": 0, "total_mib": 97887},
        {"index": 1, "used_mib": 0, "total_mib": 97887},
    ]
    assert done.as_dict()["report"] == ""


def test_every_gpu_when_none_is_named() -> None:
    done = gpu_free.wait_free(replace(SPEC, gpus=()), ops=FakeGpus({}).ops())
    assert done.wanted == [0, 1] and len(done.as_dict()["gpus"]) == 2


def test_a_leftover_sglang_worker_is_killed_and_reported() -> None:
    fake = FakeGpus({77: "python3 -m sglang.launch_server --port 31999"})
    done = gpu_free.wait_free(SPEC, ops=fake.ops())
    assert done.free and fake.signals == [(77, signal.SIGTERM)]
    assert done.killed[0]["pid"] == 77 and "31999" in done.killed[0]["cmdline"]
    assert "pid 77" in done.first_report


def test_a_worker_that_ignores_sigterm_gets_sigkill_after_the_kill_grace() -> None:
    fake = FakeGpus({77: "python3 -m sglang.launch_server"}, die_on=signal.SIGKILL)
    done = gpu_free.wait_free(replace(SPEC, kill_grace_s=2.0, timeout_s=100.0), ops=fake.ops())
    assert done.free and [s for _, s in fake.signals] == [signal.SIGTERM, signal.SIGKILL]


def test_nothing_is_killed_before_the_grace() -> None:
    fake = FakeGpus({77: "python3 -m sglang.launch_server"})
    done = gpu_free.wait_free(replace(SPEC, grace_s=1000.0, timeout_s=5.0), ops=fake.ops())
    assert not done.free and fake.signals == []


def test_a_foreign_process_is_never_killed_and_the_failure_says_so() -> None:
    fake = FakeGpus({55: "/usr/bin/someone-elses-job"})
    spec = replace(SPEC, timeout_s=5.0)
    done = gpu_free.wait_free(spec, ops=fake.ops())
    assert not done.free and fake.signals == []
    msg = done.failure_message(spec)
    assert msg.startswith("GPUs [0] still busy after 5.0s: ")
    assert "pid 55 (/usr/bin/someone-elses-job) holds 40000 MiB on GPU 0" in msg
    assert "Not killed (command line lacks 'sglang')" in msg


def test_check_mode_only_reports() -> None:
    fake = FakeGpus({77: "python3 -m sglang.launch_server"})
    done = gpu_free.wait_free(replace(SPEC, timeout_s=3.0), check_mode=True, ops=fake.ops())
    assert not done.free and fake.signals == []


def test_a_leftover_server_is_stopped_whole_main_process_first() -> None:
    fake = FakeGpus({78: "python3 -m sglang.launch_server --port 31999"})
    fake.roots[78] = 70
    done = gpu_free.wait_free(SPEC, ops=fake.ops())
    assert fake.signals[:2] == [(70, signal.SIGTERM), (78, signal.SIGTERM)]
    assert [k["pid"] for k in done.killed] == [70, 78]
    assert done.killed[0]["holder_pid"] == 78 and done.killed[0]["used_mib"] == 0
