"""The stand-in's one-shot fault plan: the server strikes itself at a chosen generation request."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
from pathlib import Path

import pytest
from sim_harness import Sim, model

from sglbench.sim import faultplan, settings


@pytest.mark.parametrize("text", ["", "stop", "stop 0", "stop -1", "pause 3", "kill 3 4", "kill x"])
def test_a_plan_that_does_not_say_what_to_do_names_the_file_and_the_form(text: str) -> None:
    with pytest.raises(faultplan.FaultPlanError, match=r"/p/fault-plan: .* write one line 'stop N' or"):
        faultplan.parse(text, "/p/fault-plan")


def test_one_server_takes_the_plan_the_next_starts_clean(tmp_path: Path) -> None:
    path = tmp_path / "fault-plan"
    path.write_text("kill 7\n")
    plan = faultplan.claim(str(path))
    assert plan == faultplan.FaultPlan("kill", 7, f"{path}.fired")
    assert plan.signal == signal.SIGKILL
    assert faultplan.claim(str(path)) is None
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_the_plan_lives_in_the_state_dir_unless_moved(tmp_path: Path) -> None:
    s = settings.load_settings({"SGLBENCH_SIM_STATE_DIR": str(tmp_path)})
    assert s.fault_plan == str(tmp_path / "fault-plan")
    moved = settings.load_settings({"SGLBENCH_SIM_FAULT_PLAN": "/x/plan"})
    assert moved.fault_plan == "/x/plan"


def _generate(sim: Sim, timeout: float = 10.0) -> int:
    body = {"text": "1+1=", "sampling_params": {"max_new_tokens": 2}}
    return sim.request("/generate", body, timeout=timeout)[0]


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_stop_at_the_third_request_hangs_the_server_until_it_is_let_go(start_sim, tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    plan.write_text("stop 3")
    sim: Sim = start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_FAULT_PLAN=str(plan))
    assert not plan.exists() and "fault plan taken: stop at generation request 3" in sim.log()
    assert [_generate(sim), _generate(sim)] == [200, 200]  # the warm-up and health checks do not count
    assert not Path(f"{plan}.fired").exists()
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        _generate(sim, timeout=1.0)
    assert Path(f"{plan}.fired").read_text().strip() == str(sim.proc.pid)
    assert _state(sim.proc.pid) == "T"  # stopped, like a server that hangs
    os.kill(sim.proc.pid, signal.SIGCONT)
    assert _generate(sim) == 200  # served again once let go; the plan struck once


def test_kill_at_the_second_request_kills_the_server_and_frees_its_gpus(start_sim, tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    plan.write_text("kill 2\n")
    sim: Sim = start_sim(["--model-path", model("qwen3-8b"), "--tp", "2"], SGLBENCH_SIM_FAULT_PLAN=str(plan))
    assert len(sim.holders()) == 2
    assert _generate(sim) == 200
    with pytest.raises((ConnectionError, urllib.error.URLError)):
        _generate(sim)
    assert sim.wait_exit(10) == -signal.SIGKILL
    assert Path(f"{plan}.fired").read_text().strip() == str(sim.proc.pid)
    deadline = time.monotonic() + 30  # its workers die with it (PR_SET_PDEATHSIG)
    while sim.holders() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sim.holders() == {}


def test_a_plan_the_server_cannot_read_stops_it_naming_the_file(start_sim, tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    plan.write_text("hang soon")
    said = r"exited with 1:[\s\S]*cannot take its fault plan: .*plan: 'hang soon'"
    with pytest.raises(AssertionError, match=said):
        start_sim(["--model-path", model("qwen3-8b")], SGLBENCH_SIM_FAULT_PLAN=str(plan))
