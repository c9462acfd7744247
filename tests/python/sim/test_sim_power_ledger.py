"""What the stand-in's power meter keeps for tests on a busy machine: its ledger (the energy account by wall
time, ``SGLBENCH_SIM_POWER_LEDGER``) and a throttling episode anchored at a generation request
(``SGLBENCH_SIM_THROTTLE_FROM``) rather than at readiness."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sim_harness import Sim, launch, model, sim_env

from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.sim import power, settings

KIND = hostlib_gpus.find_gpu("rtx-pro-6000")
assert KIND is not None
FIG = power.figures(KIND)


def test_the_ledger_keeps_the_meters_account_by_wall_time(tmp_path: Path) -> None:
    now = [100.0]
    meter = power.Meter(FIG, [0], str(tmp_path), clock=lambda: now[0], ledger=True)
    offset = time.time() - time.monotonic()  # the ledger writes the meter's monotonic instants as wall time
    busy_w = power.step_power_w(FIG, 0.0)
    meter.busy(0.0, 1.0)
    now[0] = 101.0
    meter.idle()
    now[0] = 103.0
    meter.busy(1.0, 0.5)
    now[0] = 103.5
    meter.close()  # the last line: the account at the end; the ledger stays, the board goes
    assert power.read_boards(str(tmp_path)) == []
    (path,) = (tmp_path / "power").glob(f"*{power.LEDGER_SUFFIX}")
    entries = power.read_ledger(path.read_text() + "103.9 12")  # a torn last line is dropped
    assert [round(t - offset, 3) for t, _ in entries] == [100.0, 100.0, 101.0, 103.0, 103.5]
    assert entries[-1][1] == pytest.approx(busy_w + 2 * FIG.idle_w + power.step_power_w(FIG, 1.0) * 0.5)
    assert power.ledger_energy(entries, offset + 102.0) == pytest.approx(busy_w + FIG.idle_w, abs=0.01)
    assert power.ledger_energy(entries, offset + 100.5) == pytest.approx(busy_w / 2, abs=0.01)
    with pytest.raises(ValueError):
        power.ledger_energy(entries, offset + 104.0)


def test_no_ledger_unless_asked(tmp_path: Path) -> None:
    meter = power.Meter(FIG, [0], str(tmp_path))
    meter.busy(0.0, 0.1)
    meter.close()
    assert not list((tmp_path / "power").glob(f"*{power.LEDGER_SUFFIX}"))


def test_throttle_from_setting() -> None:
    for raw, nth in (("", 0), ("ready", 0), ("Request", 1), ("request:3", 3)):
        assert settings.load_settings({"SGLBENCH_SIM_THROTTLE_FROM": raw}).throttle_from_request == nth
    for bad in ("boot", "request:0", "request:x", "ready:2"):
        with pytest.raises(settings.SimSettingsError, match="SGLBENCH_SIM_THROTTLE_FROM"):
            settings.load_settings({"SGLBENCH_SIM_THROTTLE_FROM": bad})


def test_a_throttle_from_a_request_waits_for_it(tmp_path: Path) -> None:
    """With SGLBENCH_SIM_THROTTLE_FROM=request:2 the episode begins at the second generation request (the
    readiness probes' health generations aside), not when the server is ready."""
    env = sim_env(
        tmp_path / "state",
        SGLBENCH_SIM_THROTTLE="0:60",
        SGLBENCH_SIM_THROTTLE_FROM="request:2",
        SGLBENCH_SIM_INIT_SECONDS="0",
        SGLBENCH_SIM_GRAPH_SECONDS="0",
        SGLBENCH_SIM_LOAD_GIBPS="1000",
    )
    sim: Sim = launch(tmp_path / "srv", ["--model-path", model("qwen3-8b")], env=env)
    try:
        assert sim.request("/health_generate")[0] == 200
        generate = {"text": "hello", "sampling_params": {"max_new_tokens": 2}}
        assert sim.json("/generate", generate)[0] == 200
        (board,) = power.read_boards(env["SGLBENCH_SIM_STATE_DIR"])
        assert (board.throttle_from, board.throttle_to) == (0.0, 0.0)  # no episode yet
        before = time.monotonic()
        assert sim.json("/generate", generate)[0] == 200
        (board,) = power.read_boards(env["SGLBENCH_SIM_STATE_DIR"])
        assert before <= board.throttle_from <= time.monotonic()
        assert board.throttle_to == pytest.approx(board.throttle_from + 60)
    finally:
        sim.stop()
