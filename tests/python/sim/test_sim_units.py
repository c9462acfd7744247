"""In-process unit tests of the stand-in's pieces (no subprocess, no sleeping)."""

from __future__ import annotations

import asyncio
import re
import statistics
from pathlib import Path

import pytest

from sglbench.sim import api, gpus, settings, textgen
from sglbench.sim.engine import Engine, SimRequest
from sglbench.sim.timing import TimingModel

README = Path(settings.__file__).with_name("README.md")


def test_readme_documents_every_variable() -> None:
    text = README.read_text(encoding="utf-8")
    assert settings.markdown_table() in text, "regenerate the README table from settings.markdown_table()"
    documented = set(re.findall(r"^\| `(SGLBENCH_SIM_[A-Z_]+)`", text, flags=re.M))
    assert documented == {name for name, _d, _m in settings.VARIABLES}


def test_settings_parse_and_reject() -> None:
    s = settings.load_settings(
        {
            "SGLBENCH_SIM_TIME_SCALE": "0.01",
            "SGLBENCH_SIM_FAIL_LOAD": "1",
            "SGLBENCH_SIM_ACCEPT_DIST": "1,1,2",
            "SGLBENCH_SIM_ACCOUNTING": "b",
        }
    )
    assert (s.time_scale, s.fail_load, s.accept_dist, s.accounting) == (0.01, "oom", (1.0, 1.0, 2.0), "B")
    assert s.scaled(100) == pytest.approx(1.0)
    for bad in (
        {"SGLBENCH_SIM_ERROR_RATE": "2"},
        {"SGLBENCH_SIM_ACCOUNTING": "D"},
        {"SGLBENCH_SIM_ORPHAN_WORKER": "maybe"},
        {"SGLBENCH_SIM_GPU_COUNT": "0"},
    ):
        with pytest.raises(settings.SimSettingsError, match=next(iter(bad))):
            settings.load_settings(bad)
    assert settings.unknown_variables({"SGLBENCH_SIM_TYPO": "1", "SGLBENCH_SIM_SEED": "1"}) == [
        "SGLBENCH_SIM_TYPO"
    ]


def test_gpu_kinds_and_assignment() -> None:
    kind = gpus.gpu_kind(settings.load_settings({}))
    assert (kind.smi_name, kind.memory_mib) == ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887)
    assert gpus.gpu_kind(settings.load_settings({"SGLBENCH_SIM_GPU": "h100"})).memory_mib == 81559
    assert gpus.assigned_gpus(2, 8, "4,6,7") == [4, 6]
    assert gpus.assigned_gpus(2, 8, None) == [0, 1]
    with pytest.raises(gpus.GpuConfigError, match="invalid device ordinal"):
        gpus.assigned_gpus(4, 8, "1,2")
    with pytest.raises(gpus.GpuConfigError):
        gpus.gpu_kind(settings.load_settings({"SGLBENCH_SIM_GPU": "tpu-v9"}))


def test_registry_ignores_dead_pids(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gpus.register(str(tmp_path), os.getpid(), {0: 1000}, "python3", "test")
    gpus.register(str(tmp_path), dead.pid, {0: 5000, 1: 5000}, "python3", "test")
    assert gpus.used_mib_by_gpu(str(tmp_path), 2) == {0: 1000, 1: 0}
    assert [h.pid for h in gpus.live_holders(str(tmp_path))] == [os.getpid()]


def test_tokenizer_and_generator_are_deterministic() -> None:
    a = textgen.encode("Hello, world! Tokenization", 151936)
    assert a == textgen.encode("Hello, world! Tokenization", 151936)
    assert len(a) == 6  # Hello , world ! Tokeni zation
    g1, g2 = textgen.Generator(0, "k", 100), textgen.Generator(0, "k", 100)
    assert g1.next_ids(20) == g2.next_ids(20) and g1.natural_len == g2.natural_len
    assert textgen.Generator(1, "k", 100).next_ids(20) != textgen.Generator(0, "k", 100).next_ids(20)
    assert textgen.decode(g1.next_ids(3)).count(" ") == 3


def test_a_stream_encodes_each_token_once_and_sends_the_same_bytes() -> None:
    """A /generate stream decodes and encodes only the new tokens of each event; every event is still
    byte for byte what encoding the whole object gives (escapes, non-ASCII text, nested meta)."""
    gen = textgen.Generator(0, "stream", 100)
    ids = [*gen.next_ids(40), 7, 151643, 1000]
    memo = textgen.DecodedText()
    ids_json = ""
    meta = {"id": "r", "finish_reason": {"type": "stop", "matched": 'é"\\'}, "e2e_latency": 0.25, "dp": None}
    for k in (1, 2, 5, 17, len(ids)):
        assert memo.of(ids[:k]) == textgen.decode(ids[:k])
        ids_json = ",".join(map(str, ids[:k]))
        for text in (memo.of(ids[:k]), 'say "☃"\n\u2028'):
            whole = api._sse({"text": text, "output_ids": ids[:k], "meta_info": meta})
            assert api._sse_generate(text, ids_json, meta) == whole
    assert memo.of(ids[:3]) == textgen.decode(ids[:3])  # a shorter list than the last: decoded afresh


@pytest.mark.parametrize(("mean", "max_len"), [(6.5, 16), (3.0, 4), (2.0, 12)])
def test_accept_sampler_mean(mean: float, max_len: int) -> None:
    sampler = textgen.AcceptSampler(0, "x", max_len, mean)
    draws = [sampler.draw() for _ in range(20000)]
    assert min(draws) >= 1 and max(draws) <= max_len
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.05)


def test_accept_sampler_explicit_distribution() -> None:
    sampler = textgen.AcceptSampler(0, "x", 4, 2.0, weights=[0, 0, 1, 5])  # truncated to the draft length
    assert {sampler.draw() for _ in range(200)} == {3, 4}


def _timing(**kw: float) -> TimingModel:
    base = dict(
        weights_bytes=51.05 * (1 << 30),
        bandwidth_bps=1597e9,
        flops=250e12 * 0.5,
        kv_bytes_per_token=65536,
        state_bytes_per_request=0,
        num_layers=64,
        tp_size=1,
    )
    base.update(kw)
    return TimingModel(**base)  # type: ignore[arg-type]


def test_timing_calibration_and_scaling() -> None:
    t = _timing()
    assert 1 / t.decode_step(1, 0) == pytest.approx(26.5, rel=0.02)  # published 27B BF16 TP1 anchor
    assert t.decode_step(64, 64 * 2000) > t.decode_step(1, 2000)  # batching grows step time
    assert 64 / t.decode_step(64, 64 * 2000) > 10 / t.decode_step(1, 2000)  # ...but raises throughput
    half = _timing(weights_bytes=51.05 * (1 << 30) / 2, tp_size=2)
    assert half.decode_step(1, 0) < t.decode_step(1, 0)
    spec = _timing(draft_weights_bytes=3.2 * (1 << 30), draft_passes=1, num_draft_tokens=16)
    assert t.decode_step(1, 0) < spec.decode_step(1, 0) < 2 * t.decode_step(1, 0)


def _request(rid: str, max_new: int, sampler: textgen.AcceptSampler | None = None) -> SimRequest:
    return SimRequest(
        rid=rid,
        prompt_ids=[1] * 10,
        max_new_tokens=max_new,
        ignore_eos=True,
        generator=textgen.Generator(0, rid, 100),
        sampler=sampler,
        eos_id=2,
    )


def test_engine_caps_running_requests_and_queues_the_rest() -> None:
    lines: list[str] = []

    async def scenario() -> list[SimRequest]:
        engine = Engine(
            _timing(),
            max_running=2,
            max_total_tokens=100000,
            time_scale=0.0,
            decode_log_interval=1,
            log=lines.append,
            hybrid=False,
            cuda_graph=True,
            cuda_graph_max_bs=256,
            mamba_slots=None,
        )
        engine.start()
        reqs = [_request(f"r{i}", 20) for i in range(5)]
        for req in reqs:
            engine.submit(req)
        for req in reqs:
            while not req.done:
                await req.events.get()
        return reqs

    reqs = asyncio.run(scenario())
    assert all(len(r.output_ids) == 20 for r in reqs)
    running = [int(m.group(1)) for m in map(re.compile(r"#running-req: (\d+)").search, lines) if m]
    queued = [int(m.group(1)) for m in map(re.compile(r"#queue-req: (\d+)").search, lines) if m]
    assert max(running) == 2 and max(queued) >= 1


def test_engine_speculative_steps_emit_several_tokens() -> None:
    async def scenario() -> SimRequest:
        spec = _timing(draft_passes=1, num_draft_tokens=16)
        engine = Engine(
            spec,
            max_running=4,
            max_total_tokens=100000,
            time_scale=0.0,
            decode_log_interval=1000,
            log=lambda m: None,
            hybrid=True,
            cuda_graph=True,
            cuda_graph_max_bs=256,
            mamba_slots=8,
        )
        engine.start()
        req = _request("s", 200, textgen.AcceptSampler(0, "s", 16, 6.5))
        engine.submit(req)
        while not req.done:
            await req.events.get()
        return req

    req = asyncio.run(scenario())
    assert len(req.output_ids) == 200
    assert sum(req.accept_hist.values()) == req.verify_ct
    assert 200 / req.verify_ct > 3


@pytest.mark.parametrize(
    ("value", "max_len", "support"), [(2.0, 4, {2}), (2.5, 4, {2, 3}), (9.0, 4, {4}), (0.5, 4, {1})]
)
def test_simulated_accept_match_expected(value: float, max_len: int, support: set[int]) -> None:
    """SGLANG_SIMULATE_ACC_LEN, match-expected: the floor or the ceiling (clamped to [1, max_len]), the mean
    met (SGLang's sample_simulated_acc_len)."""
    sampler = textgen.SimulatedAcceptSampler(0, "x", max_len, value, "match-expected")
    draws = [sampler.draw() for _ in range(20000)]
    assert set(draws) == support
    assert statistics.fmean(draws) == pytest.approx(min(max(value, 1.0), max_len), rel=0.03)


def test_simulated_accept_multinomial_and_bad_method() -> None:
    sampler = textgen.SimulatedAcceptSampler(0, "x", 4, 2.5, "multinomial")
    draws = [sampler.draw() for _ in range(5000)]
    assert set(draws) <= {1, 2, 3, 4} and len(set(draws)) >= 3  # a rounded normal of sd 1, clamped
    with pytest.raises(ValueError, match="Invalid simulate_acc_method: nope"):
        textgen.SimulatedAcceptSampler(0, "x", 4, 2.5, "nope")


def test_simulate_acc_len_settings() -> None:
    off = settings.load_settings({"SGLANG_SIMULATE_ACC_LEN": "-1"})
    assert off.simulate_acc_len is None and settings.load_settings({}).simulate_acc_len is None
    on = settings.load_settings(
        {"SGLANG_SIMULATE_ACC_LEN": "2.5", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
    )
    assert (on.simulate_acc_len, on.simulate_acc_method, on.simulate_acc_token_mode) == (
        2.5,
        "match-expected",
        "real-draft-token",
    )
    with pytest.raises(settings.SimSettingsError, match="SGLANG_SIMULATE_ACC_LEN"):
        settings.load_settings({"SGLANG_SIMULATE_ACC_LEN": "two"})
