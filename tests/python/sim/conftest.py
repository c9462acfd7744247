"""Fixtures for the stand-in tests (the harness lives in sim_harness.py)."""

from sim_harness import plain_sim, spec_sim, start_sim

__all__ = ["plain_sim", "spec_sim", "start_sim"]
