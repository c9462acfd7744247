"""hostlib/readiness.py: the wait loop's decisions, with an injected clock (no real time)."""

from __future__ import annotations

from dataclasses import dataclass

from sglbench.hostlib import readiness


@dataclass
class Unit:
    ended: bool


class Sim:
    """A fake clock, unit and health endpoint following a script of events."""

    def __init__(self, ready_at: float | None = None, dies_at: float | None = None) -> None:
        self.now = 0.0
        self.ready_at = ready_at
        self.dies_at = dies_at
        self.probes: list[float] = []
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def unit(self) -> Unit:
        return Unit(ended=self.dies_at is not None and self.now >= self.dies_at)

    def probe(self, timeout: float) -> int | None:
        self.probes.append(self.now)
        self.now += 0.01
        if self.ready_at is not None and self.now >= self.ready_at:
            return 200
        return 503 if self.now > 1 else None


def run(sim: Sim, timeout: float = 60.0) -> readiness.WaitResult:
    return readiness.wait_ready(sim.unit, sim.probe, timeout, 0.2, sim.clock, sim.sleep)


def test_ready() -> None:
    sim = Sim(ready_at=3.0)
    result = run(sim)
    assert result.outcome == readiness.READY and result.ready
    assert 3.0 <= result.elapsed_s < 3.25
    assert result.statuses["200"] == 1


def test_dead_unit_ends_the_wait_within_one_interval() -> None:
    sim = Sim(dies_at=5.0)
    result = run(sim, timeout=900.0)
    assert result.outcome == readiness.UNIT_ENDED
    assert 5.0 <= result.elapsed_s <= 5.25
    assert all(t < 5.0 for t in sim.probes)


def test_unit_dead_before_the_first_poll_is_never_probed() -> None:
    sim = Sim(dies_at=0.0)
    result = run(sim)
    assert result.outcome == readiness.UNIT_ENDED
    assert sim.probes == []
    assert result.polls == 0


def test_timeout() -> None:
    sim = Sim()
    result = run(sim, timeout=2.0)
    assert result.outcome == readiness.TIMEOUT
    assert 2.0 <= result.elapsed_s < 2.3
    assert max(sim.sleeps) <= 0.2


def test_death_during_the_last_interval_is_reported_as_death_not_timeout() -> None:
    sim = Sim(dies_at=1.99)
    result = run(sim, timeout=2.0)
    assert result.outcome == readiness.UNIT_ENDED
