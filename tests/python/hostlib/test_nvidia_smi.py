"""hostlib/nvidia_smi.py: CSV parsing and the report of who holds the GPUs we need."""

from __future__ import annotations

import sys

import pytest

from sglbench.hostlib import nvidia_smi as smi

GPUS = "0, GPU-a, RTX, 0, 97887\n1, GPU-b, RTX, 50000, 97887\n2, GPU-c, RTX, 300, 97887\n"
APPS = "4242, GPU-b, 50000, python3\n77, GPU-x, 10, python, with comma\n"


def test_parse() -> None:
    gpus = smi.parse_gpus(GPUS)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[1].used_mib == 50000 and gpus[1].total_mib == 97887
    apps = smi.parse_apps(APPS)
    assert apps[0] == smi.ComputeApp(4242, "GPU-b", 50000, "python3")
    assert apps[1].process_name == "python, with comma"
    assert smi.parse_apps("No running processes found\n") == []
    assert smi.parse_apps("1, GPU-a, [N/A], python3\n")[0].used_mib == 0  # no permission to see usage


def test_short_rows_are_an_error() -> None:
    with pytest.raises(smi.NvidiaSmiError, match="expected 5"):
        smi.parse_gpus("0, GPU-a\n")


def test_report_only_counts_wanted_gpus() -> None:
    gpus, apps = smi.parse_gpus(GPUS), smi.parse_apps(APPS)
    report = smi.gpu_report(gpus, [a for a in apps if a.gpu_uuid != "GPU-x"], [0], 1024)
    assert report.free
    report = smi.gpu_report(gpus, apps, [1], 1024, {4242: "python3 -m sglang.launch_server"})
    assert not report.free
    assert report.busy_gpus == [{"index": 1, "used_mib": 50000, "total_mib": 97887}]
    assert [h.pid for h in report.holders] == [4242, 77]  # unknown GPU uuid counts against every GPU
    assert "pid 4242 (python3 -m sglang.launch_server) holds 50000 MiB on GPU 1" in report.describe()


def test_threshold_and_all_gpus() -> None:
    gpus = smi.parse_gpus(GPUS)
    assert [g["index"] for g in smi.gpu_report(gpus, [], None, 1024).busy_gpus] == [1]
    assert [g["index"] for g in smi.gpu_report(gpus, [], None, 100).busy_gpus] == [1, 2]


def test_query_argv() -> None:
    assert smi.gpu_query_argv()[1] == "--query-gpu=index,uuid,name,memory.used,memory.total"
    assert smi.apps_query_argv("/x")[0] == "/x"


def test_server_root_walks_up_matching_ancestors() -> None:
    parents = {30: 20, 20: 10, 10: 1}
    cmd = {20: "python3 -m sglang.launch_server", 10: "/bin/bash"}
    assert smi.server_root(30, "sglang", parents.get, cmd.get) == 20
    assert smi.server_root(30, "", parents.get, cmd.get) == 30
    assert smi.server_root(5, "sglang", lambda pid: 0, cmd.get) == 5


def test_parent_pid_of_this_process() -> None:
    import os

    assert smi.parent_pid(os.getpid()) == os.getppid()


def test_queries_run_side_by_side_answer_in_the_order_asked_and_a_failure_names_its_command() -> None:
    py = sys.executable
    slow = [py, "-c", "import time; time.sleep(0.3); print('gpus')"]
    fast = [py, "-c", "print('apps')"]
    assert smi.run_nvidia_smi_all([slow, fast]) == ["gpus\n", "apps\n"]
    failing = [py, "-c", "import sys; sys.exit('no driver')"]
    with pytest.raises(smi.NvidiaSmiError, match=r"exited 1: no driver"):
        smi.run_nvidia_smi_all([fast, failing])
    with pytest.raises(smi.NvidiaSmiError, match=r"could not run /nonexistent/nvidia-smi"):
        smi.run_nvidia_smi_all([fast, ["/nonexistent/nvidia-smi"]])
