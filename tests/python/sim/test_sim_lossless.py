"""The stand-in's speculative outputs against its own baseline: identical token ids at temperature 0
unless SGLBENCH_SIM_DIVERGE makes them differ, and the losslessness gate tells the two apart."""

from __future__ import annotations

import json

import pytest
from sim_harness import Sim, model, sse_events

from sglbench import lossless
from sglbench.hostlib import loadgen_api as api
from sglbench.sim import settings

PROMPTS = [f"losslessness probe number {i}: say something" for i in range(16)]
SPEC_ARGS = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    model("eagle3-qwen3-8b"),
    "--speculative-num-draft-tokens",
    "4",
]


def _outputs(sim: Sim) -> list[tuple[tuple[str, str], list[int]]]:
    """Each prompt streamed on the native API and decoded as the load generator does."""
    out = []
    for i, text in enumerate(PROMPTS):
        body = {"text": text, "stream": True, "sampling_params": {"max_new_tokens": 24, "ignore_eos": True}}
        status, raw, _ = sim.request("/generate", body)
        assert status == 200
        rec = api.RequestRecord(idx=i, prompt_id=f"p{i}", category="c", http_status=200)
        dec = api.StreamDecoder("native", rec, keep_output_ids=True)
        dec.on_event([p.encode() for p in sse_events(raw)], 0.0)
        dec.finish()
        assert rec.error is None and rec.output_ids is not None and len(rec.output_ids) == 24
        out.append((("s", f"p{i}"), rec.output_ids))
    return out


def test_gate_passes_a_clean_stand_in_and_catches_injected_divergence(start_sim) -> None:
    args = ["--model-path", model("qwen3-8b")]
    base = dict(_outputs(start_sim(args)))
    clean = lossless.compare(base, _outputs(start_sim(args + SPEC_ARGS)))
    assert clean.status == lossless.PASS and clean.n_exact == len(PROMPTS)

    lossy = lossless.compare(base, _outputs(start_sim(args + SPEC_ARGS, SGLBENCH_SIM_DIVERGE="0.5:5")))
    assert lossy.status == lossless.FAIL
    assert 0 < lossy.n_exact < len(PROMPTS)  # some requests were picked, not all
    assert set(lossy.divergences) == {5}


def test_divergence_only_touches_speculative_configs(start_sim) -> None:
    args = ["--model-path", model("qwen3-8b")]
    body = {"text": PROMPTS[0], "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
    plain = start_sim(args).json("/generate", body)[1]["output_ids"]
    again = start_sim(args, SGLBENCH_SIM_DIVERGE="1:0").json("/generate", body)[1]["output_ids"]
    assert plain == again


@pytest.mark.parametrize("raw", ["2", "0.5:-1", "x", "0.5:3:1"])
def test_bad_diverge_setting_names_the_variable(raw: str) -> None:
    with pytest.raises(settings.SimSettingsError, match="SGLBENCH_SIM_DIVERGE"):
        settings.load_settings({"SGLBENCH_SIM_DIVERGE": raw})


def test_diverge_setting_parses_share_and_position() -> None:
    assert settings.load_settings({}).diverge is None
    d = settings.load_settings({"SGLBENCH_SIM_DIVERGE": "0.25:16"}).diverge
    assert d is not None and (d.share, d.position) == (0.25, 16)
    assert settings.load_settings({"SGLBENCH_SIM_DIVERGE": "0.5"}).diverge == settings.Diverge(0.5, 8)


@pytest.mark.parametrize(
    ("version", "present", "absent"),
    [
        ("0.5.10", "spec_accept_histogram", "spec_correct_drafts_histogram"),
        ("0.5.18", "spec_correct_drafts_histogram", "spec_accept_token_num"),
        ("0.5.23", "spec_num_correct_drafts", "spec_accepted_drafts"),
    ],
)
def test_spec_counters_spelled_as_the_impersonated_release(start_sim, version, present, absent) -> None:
    sim = start_sim(["--model-path", model("qwen3-8b"), *SPEC_ARGS], SGLBENCH_SIM_SGLANG_VERSION=version)
    body = {"text": PROMPTS[0], "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}}
    meta = sim.json("/generate", body)[1]["meta_info"]
    assert present in meta and absent not in meta
    if version == "0.5.18":  # the old names kept as aliases
        assert meta["spec_accept_histogram"] == meta["spec_correct_drafts_histogram"]


def test_spec_counters_only_on_the_final_streamed_event(start_sim) -> None:
    sim = start_sim(["--model-path", model("qwen3-8b"), *SPEC_ARGS])
    body = {"text": PROMPTS[1], "stream": True, "sampling_params": {"max_new_tokens": 24, "ignore_eos": True}}
    status, raw, _ = sim.request("/generate", body)
    assert status == 200
    events = [json.loads(p) for p in sse_events(raw) if p != "[DONE]"]
    assert len(events) > 1
    assert all(not any(k.startswith("spec_") for k in e["meta_info"]) for e in events[:-1])
    final = events[-1]["meta_info"]
    assert (
        final["spec_verify_ct"] >= 1
        and sum(final["spec_correct_drafts_histogram"]) == final["spec_verify_ct"]
    )


def test_shared_prefix_groups_hit_the_stand_ins_prefix_cache(start_sim) -> None:
    from sglbench.hostlib import prompts

    sim = start_sim(["--model-path", model("qwen3-8b")])
    group = prompts.resolve_prompt_source("shared-prefix:2x2:200:10", seed=0)
    cached = []
    for p in group:
        body = {"text": p.text, "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}
        cached.append(sim.json("/generate", body)[1]["meta_info"]["cached_tokens"])
    # the first question of each group finds nothing of its system prompt; the second finds it
    assert cached[0] == 0 and cached[2] < 50
    assert cached[1] > 200 and cached[3] > 200
