"""Contract, speculative decoding: one server per side and case (NGRAM; STANDALONE; NGRAM with SGLang's
``SGLANG_SIMULATE_ACC_LEN``), the final ``meta_info`` spec fields and the relations SGLang 0.5.23's own
source gives them, the stream, ``/server_info`` and ``/metrics`` (contract_lib.py: how sides compare).

The real side starts through serve.sh, which adds the intel_amx split attention backends and relies on
the env's pure-torch sgl_kernel CPU ops (docs/real-sglang.md, "Speculative decoding"); when the env's
check of those ops failed, it skips with tier.sh's line. Values that depend on the weights (how many
drafts the tiny models accept) are not compared, only what holds for any weights: key names, types,
the relations between the counters, where the fields appear. Nothing here reads a wall-clock time.

The relations, from sglang 0.5.23 (``TokenizerManager._calculate_spec_decoding_metrics``,
``Req.update_spec_correct_drafts_histogram``, ``batch_result_processor``): a finished request that had
at least one verify step gets ``spec_verify_ct``, ``spec_num_correct_drafts``,
``spec_num_proposed_drafts = spec_verify_ct * (speculative_num_draft_tokens - 1)``,
``spec_accept_rate = correct / proposed``, ``spec_accept_length = completion_tokens / spec_verify_ct``
and ``spec_correct_drafts_histogram`` (verify steps by number of correct drafts, grown on demand: its
length is the largest count seen + 1). The first output token comes from the prefill, each verify step
gives its correct drafts plus one bonus token, and the last step is cut to ``max_new_tokens``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from contract_lib import (
    STAND_IN_MODEL,
    Server,
    check,
    metrics_families,
    need_spec_ops,
    save_observed,
    sse,
    start,
)

PROMPT = "The quick brown fox jumps over the lazy dog."
MAX_NEW = 48
SIM_ACC_LEN = "2.5"  # fractional: SGLang's match-expected method draws 2 or 3 tokens per verify step
FIXED_TOKEN = 100  # SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed (the default) makes every verified token id 100

NGRAM = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"]
EAGLE_LIKE = [
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
]
# what serve.sh adds to the real command line with any --speculative-algorithm; the stand-in gets it here
SERVE_SPEC = ["--prefill-attention-backend", "intel_amx", "--decode-attention-backend", "intel_amx"]


@dataclass(frozen=True)
class Case:
    flags: list[str]
    draft: bool = False  # + --speculative-draft-model-path (real: the env's tiny-qwen2-draft, the target's
    # own weights; stand-in: the same config.json as the target)
    env: dict[str, str] = field(default_factory=dict)


CASES = {
    "ngram": Case(NGRAM),
    "standalone": Case(["--speculative-algorithm", "STANDALONE", *EAGLE_LIKE], draft=True),
    "ngram.sim_acc_len": Case(NGRAM, env={"SGLANG_SIMULATE_ACC_LEN": SIM_ACC_LEN}),
}


def command_line(side: str, case: Case) -> list[str]:
    flags = list(case.flags)
    if case.draft:
        flags += [
            "--speculative-draft-model-path",
            "tiny-qwen2-draft" if side == "real" else str(STAND_IN_MODEL),
        ]
    return flags if side == "real" else [*flags, *SERVE_SPEC]


@dataclass
class SpecServer:
    server: Server
    case: str

    @property
    def side(self) -> str:
        return self.server.side

    def surface(self, name: str) -> str:
        return f"spec.{self.case}.{name}"


PARAMS = [
    pytest.param((side, case), id=f"{side}-{case}", marks=[pytest.mark.real] if side == "real" else [])
    for case in CASES
    for side in ("real", "stand-in")
]


@pytest.fixture(scope="module", params=PARAMS)
def spec(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpecServer]:
    side, name = request.param
    if side == "real":
        need_spec_ops()
    case = CASES[name]
    tmp = tmp_path_factory.mktemp(f"contract-spec-{name}-{side}")
    srv = start(side, tmp / "server.log", command_line(side, case), tmp / "state", dict(case.env))
    try:
        yield SpecServer(srv, name)
    finally:
        srv.stop()


def spec_fields(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k.startswith("spec_")}


def draft_tokens(srv: Server) -> int:
    return int(srv.get("/server_info").json()["speculative_num_draft_tokens"])


def relations(meta: dict[str, Any], n_draft: int) -> dict[str, bool]:
    """What holds between the final meta_info's spec fields for any weights (the module's docstring)."""
    verify = meta["spec_verify_ct"]
    correct = meta["spec_num_correct_drafts"]
    proposed = meta["spec_num_proposed_drafts"]
    hist = meta["spec_correct_drafts_histogram"]
    done = meta["completion_tokens"]
    overshoot = 1 + verify + correct - done  # drafts accepted in the last step beyond max_new_tokens
    return {
        "proposed = verify_ct * (num_draft_tokens - 1)": proposed == verify * (n_draft - 1),
        "accept_rate = correct / proposed": math.isclose(meta["spec_accept_rate"], correct / proposed),
        "accept_length = completion_tokens / verify_ct": math.isclose(
            meta["spec_accept_length"], done / verify
        ),
        "sum(histogram) = verify_ct": sum(hist) == verify,
        "sum(i * histogram[i]) = correct": sum(i * n for i, n in enumerate(hist)) == correct,
        "len(histogram) <= num_draft_tokens": len(hist) <= n_draft,
        "histogram ends with its largest count seen": bool(hist) and hist[-1] > 0,
        "completion = 1 + verify_ct + correct - (cut in the last step)": 0 <= overshoot <= n_draft - 1,
    }


def generate(srv: Server, stream: bool) -> Any:
    body = {
        "text": PROMPT,
        "stream": stream,
        "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True},
    }
    r = srv.post("/generate", body, stream=stream)
    assert r.status_code == 200, r.text[:500] if not stream else r.status_code
    return r


def sim_acc_facts(out: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """SGLANG_SIMULATE_ACC_LEN=2.5, match-expected, token mode fixed: each verify step keeps 2 or 3 tokens
    (1 or 2 correct drafts) and every verified token is id 100; the prefill's token is the model's."""
    hist = meta["spec_correct_drafts_histogram"]
    return {
        "histogram_support": [i for i, n in enumerate(hist) if n],
        "verified_tokens_all_fixed": set(out["output_ids"][1:]) == {FIXED_TOKEN},
    }


def test_spec_generate(spec: SpecServer) -> None:
    srv = spec.server
    out = generate(srv, stream=False).json()
    meta = out["meta_info"]
    fields = spec_fields(meta)
    assert meta["completion_tokens"] == len(out["output_ids"]) == MAX_NEW
    n_draft = draft_tokens(srv)
    observed: dict[str, Any] = {
        "spec_fields": {k: type(v).__name__ for k, v in sorted(fields.items())},
        "histogram_item_type": sorted({type(n).__name__ for n in fields["spec_correct_drafts_histogram"]}),
        "relations": relations(meta, n_draft),
        "num_draft_tokens": n_draft,
    }
    if spec.case == "ngram.sim_acc_len":
        observed["simulate_acc_len"] = sim_acc_facts(out, meta)
    save_observed(
        spec.side, spec.surface("generate.values"), {"spec": fields, "output_ids": out["output_ids"]}
    )
    check(spec.side, spec.surface("generate"), observed)


def test_spec_stream(spec: SpecServer) -> None:
    srv = spec.server
    _raw, events = sse(generate(srv, stream=True))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    metas = [c["meta_info"] for c in chunks]
    final = metas[-1]
    counts = [m["completion_tokens"] for m in metas]
    steps = [b - a for a, b in itertools.pairwise([0, *counts])]
    observed = {
        "spec_keys_before_the_final_chunk": sorted({k for m in metas[:-1] for k in spec_fields(m)}),
        "final_spec_keys": sorted(spec_fields(final)),
        "final_relations": relations(final, draft_tokens(srv)),
        # one chunk for the prefill's token, then at most one per verify step (a slow reader may get
        # several steps in one chunk: SGLang sends what is there when it writes)
        "chunks <= 1 + verify_ct": len(chunks) <= 1 + final["spec_verify_ct"],
        "every chunk adds tokens": all(n >= 1 for n in steps),
        "completion_tokens": counts[-1],
    }
    save_observed(
        spec.side, spec.surface("stream.values"), {"tokens_per_chunk": steps, "spec": spec_fields(final)}
    )
    check(spec.side, spec.surface("stream"), observed)


SERVER_INFO_KEYS = re.compile(r"speculative_.*|(prefill_|decode_)?attention_backend|disable_overlap_schedule")


def test_spec_server_info(spec: SpecServer) -> None:
    info = spec.server.get("/server_info").json()
    state = info["internal_states"][0]

    def speculative(d: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in sorted(d.items()) if SERVER_INFO_KEYS.fullmatch(k)}
        if out.get("speculative_draft_model_path") is not None:  # the env's models/ vs the stand-in's fixture
            out["speculative_draft_model_path"] = "(set)"
        return out

    others = {k: v for k, v in state.items() if "spec" in k and not k.startswith("speculative_")}
    # avg_spec_accept_length: the scheduler's running mean, set at its decode log (every 40 steps), so
    # whether it is there yet depends on how many steps the requests so far took
    avg = others.pop("avg_spec_accept_length", None)
    observed = {
        "values": speculative(info),
        "internal_states_speculative": speculative(state),
        "internal_states_spec_types": {k: type(v).__name__ for k, v in sorted(others.items())},
        "avg_spec_accept_length_absent_or_float": avg is None or isinstance(avg, float),
    }
    check(spec.side, spec.surface("server_info"), observed)


VERIFY_CALLS = "sglang:spec_verify_calls_total"


def counter_total(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


def test_spec_metrics(spec: SpecServer) -> None:
    """The speculative families (names, types, labels), and that the verify-call counter grows by a
    finished request's spec_verify_ct (the counter also counts the start-up's warm-up request: compared
    before and after; polled, as it may trail the answer)."""
    srv = spec.server
    before = counter_total(srv.get("/metrics").text, VERIFY_CALLS)
    verify = generate(srv, stream=False).json()["meta_info"]["spec_verify_ct"]
    deadline = time.monotonic() + 60
    while True:
        text = srv.get("/metrics").text
        if counter_total(text, VERIFY_CALLS) >= before + verify or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    fams = {k: v for k, v in metrics_families(text).items() if "spec" in k}
    observed = {
        "families": fams,
        "verify_calls_total grows by the request's spec_verify_ct": counter_total(text, VERIFY_CALLS)
        == before + verify,
    }
    check(spec.side, spec.surface("metrics"), observed)
