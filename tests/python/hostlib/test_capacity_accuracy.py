"""Planner vs real SGLang startup logs (tests/fixtures/startup_logs/*, each with its source).

Free memory at start and weight memory are read from the log itself (as the planner's
``--free-gib``/``--weights-gib`` would be given on a real host); the planner then has to reproduce
the KV pool SGLang allocated. Tolerances are per case (case.json ``tolerance_rel``); docs/capacity.md
has the accuracy table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, gpus, sglang_args

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CASES = sorted(p.parent.name for p in (FIXTURES / "startup_logs").glob("*/case.json"))

LOAD_BEGIN = re.compile(r"Load weight begin\. avail mem=(?P<avail>[\d.]+) GB")
LOAD_END = re.compile(r"Load weight end\. .*?avail mem=(?P<avail>[\d.]+) GB(?:, mem usage=(?P<w>[\d.]+) GB)?")
# some sources quote the line shortened ("KV Cache allocated. #tokens: ...")
KV_ALLOC = re.compile(
    r"KV Cache (?:is )?allocated\. (?:dtype: [\w.]+, )?(?:#tokens: (?P<tokens>\d+))?"
    r"(?:,? ?K size: (?P<k>[\d.]+) GB)?"
)
SUMMARY = re.compile(r"max_total_num_tokens=(?P<tok>\d+),.*?context_len=(?P<ctx>\d+)")


def load_case(name: str) -> tuple[dict, str]:
    case_dir = FIXTURES / "startup_logs" / name
    return json.loads((case_dir / "case.json").read_text()), (case_dir / "server.log").read_text()


def memory_from_log(log: str) -> tuple[float | None, float | None]:
    """(free at start, weights) in GiB from the Load weight begin/end lines, when present."""
    begin = LOAD_BEGIN.search(log)
    end = LOAD_END.search(log)
    if end is None:
        return None, None
    avail_end = float(end["avail"])
    if end["w"] is not None:
        weights = float(end["w"])
        return (float(begin["avail"]) if begin else avail_end + weights), weights
    if begin is None:  # the case gives free memory and weights (case.json says where they come from)
        return None, None
    return float(begin["avail"]), float(begin["avail"]) - avail_end


def memory_inputs(case: dict, log: str) -> tuple[float | None, float | None, str]:
    """(free at start, weights, where they come from) as the replay uses them: the log's Load weight lines,
    else case.json (its source.txt says where those numbers are from), else the planner's default."""
    free, weights = memory_from_log(log)
    origin = "log" if free is not None else ""
    if "free_gib" in case or "weights_gib" in case:
        origin = "case.json"
    free = case.get("free_gib", free)
    weights = case.get("weights_gib", weights)
    return free, weights, origin


def describe_inputs(case: dict, log: str) -> str:
    free, weights, origin = memory_inputs(case, log)
    free_text = f"free {free:.2f}" if free is not None else "free: planner default"
    weights_text = f"weights {weights:.2f} GiB" if weights is not None else "weights: checkpoint estimate"
    return f"{free_text}, {weights_text} ({origin or 'not logged'})"


def plan_case(name: str) -> tuple[capacity.Plan, dict, str]:
    case, log = load_case(name)
    model = case["model"]
    model_dir = FIXTURES / model if "/" in model else FIXTURES / "models" / model
    argv = ["--model-path", str(model_dir)]
    draft_cfg = None
    if "draft_model" in case:
        draft_dir = FIXTURES / "models" / case["draft_model"]
        argv += ["--speculative-draft-model-path", str(draft_dir)]
        draft_cfg = capacity.read_config(str(draft_dir), "--speculative-draft-model-path")
    # the release the log came from (when known) picks SGLang's default rule for what the flags leave out
    args = sglang_args.parse_launch_args_or_raise(argv + case["launch_args"], case.get("sglang_version"))
    free, weights, _ = memory_inputs(case, log)
    gpu_gib = case.get("gpu_mem_gib") or gpus.find_gpu(case["gpu"]).memory_gib
    plan = capacity.plan(
        args,
        capacity.read_config(str(model_dir), "--model-path"),
        draft_cfg,
        gpu_gib,
        free_gib=free,
        weights_gib=weights,
        draft_weights_gib=case.get("draft_weights_gib"),
        accounting=case["accounting"],
        recommend=False,
        platform=case.get("platform", "cuda"),
    )
    return plan, case, log


def test_there_are_enough_real_cases():
    assert len(CASES) >= 3


@pytest.mark.parametrize("name", CASES)
def test_planner_matches_logged_kv_capacity(name):
    plan, case, log = plan_case(name)
    obs = case["observed"]
    tol = case["tolerance_rel"]
    if "max_total_num_tokens" in obs:
        logged = [int(m["tok"]) for m in SUMMARY.finditer(log)] or [
            int(m["tokens"]) for m in KV_ALLOC.finditer(log) if m["tokens"]
        ]
        quoted = f"{obs['max_total_num_tokens']:,}" in log or f"={obs['max_total_num_tokens']}" in log
        assert obs["max_total_num_tokens"] in logged or quoted, "case.json must match its log"
        assert plan.max_total_num_tokens == pytest.approx(obs["max_total_num_tokens"], rel=tol)
    if "rest_gib" in obs:
        assert f"{obs['rest_gib']:.2f} GB" in log
        assert plan.rest_gib == pytest.approx(obs["rest_gib"], rel=tol)
    if "kv_size_gib" in obs:  # MLA pools print one "KV size" (latent, and the DSA indexer key)
        assert f"KV size: {obs['kv_size_gib']:.2f} GB" in log
        assert plan.k_size_gib == pytest.approx(obs["kv_size_gib"], rel=tol)
    if "k_size_gib" in obs:
        assert plan.k_size_gib == pytest.approx(obs["k_size_gib"], abs=0.011)
    if "context_len" in obs:
        assert plan.context_len == obs["context_len"]
    if "mamba_slots" in obs:
        assert f"max_mamba_cache_size: {obs['mamba_slots']}" in log
        assert plan.mamba_slots == pytest.approx(obs["mamba_slots"], rel=tol)
    if "mem_fraction_static" in obs:
        assert f"mem_fraction_static={obs['mem_fraction_static']}" in log
        assert plan.mem_fraction_static == pytest.approx(obs["mem_fraction_static"], abs=1e-9)
    if "failure" in obs:
        assert obs["failure"] in log
        assert plan.failure is not None and plan.failure.kind == obs["failure_kind"]
        exception, sep, text = obs["failure"].partition(": ")
        if sep and exception.endswith("Error"):
            # SGLang words this error per release: the exception and its first sentence must match
            assert plan.failure.exception == exception
            assert plan.failure.message.startswith(text)
        else:
            assert plan.failure.message == obs["failure"]
    elif "failure_kind" in obs:
        # the source reports the failure in its own words (case.json says so): the kind is checked
        assert plan.failure is not None and plan.failure.kind == obs["failure_kind"]
    if "failure_detail" in obs:
        assert obs["failure_detail"] in log
        assert obs["failure_detail"] in plan.failure.message
    if "max_running_requests" in obs:
        assert f"capped to {obs['max_running_requests']}" in log
        assert plan.max_running_requests == pytest.approx(obs["max_running_requests"], abs=1)
    if "minimum_viable" in obs:
        # SGLang samples "available" at configure time, a moment after the logged "Load weight end": the
        # two logged figures reproduce its fraction to +-0.0002
        assert minimum_viable(plan) == pytest.approx(obs["minimum_viable"], abs=2e-4)


def minimum_viable(plan: capacity.Plan) -> float:
    """The minimum viable --mem-fraction-static the planned failure text states."""
    text = plan.failure.message if plan.failure else ""
    match = re.search(r"minimum viable = 1 - available/pre = (\d\.\d{4})", text)
    assert match, text
    return float(match.group(1))


def test_kv_budget_to_tokens_matches_the_patched_mi355x_log():
    """The MI355X log also shows a budget (152.88 GiB) and the tokens it produced: cell = 98,304 B."""
    plan, case, _ = plan_case("mi355x-qwen3-30b-a3b")
    obs = case["observed"]
    assert plan.cell_bytes == 98304
    predicted = int(obs["patched_budget_gib"] * (1 << 30)) // plan.cell_bytes
    assert predicted == pytest.approx(obs["patched_tokens"], rel=1e-4)


def test_qwq_pool_end_matches_log():
    """Memory pool end = after weights - K - V - req_to_token (1 GiB here: 2049 x 131076 int32);
    SGLang also allocates ~0.15 GiB of small buffers the planner does not model."""
    plan, case, _ = plan_case("qwq-32b-tp4-l4")
    assert plan.req_to_token_gib == pytest.approx(1.0, abs=0.01)
    assert plan.pool_end_avail_gib == pytest.approx(case["observed"]["pool_end_avail_gib"], abs=0.2)


def test_defaults_only_plan_is_close_on_a_large_gpu():
    """No log figures at all (default free memory, weights estimated from config.json): within 2%."""
    case, _ = load_case("sglang-docs-llama3.1-8b-h100")
    argv = ["--model-path", str(FIXTURES / "models" / case["model"]), *case["launch_args"]]
    p = capacity.plan_command(argv, gpu=case["gpu"], accounting=case["accounting"])
    assert p.weights_source == "estimate"
    assert p.max_total_num_tokens == pytest.approx(case["observed"]["max_total_num_tokens"], rel=0.02)
    assert p.max_total_num_tokens < case["observed"]["max_total_num_tokens"]  # the default is conservative


# --- the accuracy table of docs/capacity.md, recomputed -----------------------------------------------

DOC = Path(__file__).resolve().parents[3] / "docs" / "capacity.md"
TABLE_START = "<!-- accuracy-table:start (tests/python/hostlib/test_capacity_accuracy.py) -->"
TABLE_END = "<!-- accuracy-table:end -->"


def accuracy_rows() -> list[dict]:
    """One row per public case: what was logged, what the planner predicts, the error."""
    rows = []
    for name in CASES:
        plan, case, log = plan_case(name)
        obs = case["observed"]
        row = {
            "case": name,
            "architecture": case["architecture"],
            "release": case.get("sglang_version", "not logged"),
            "source": case["source"],
            "setup": case["description"],
            "inputs": describe_inputs(case, log),
        }
        if "max_total_num_tokens" in obs:
            logged, got = obs["max_total_num_tokens"], plan.max_total_num_tokens
            row.update(kind="tokens", observed=f"{logged:,}", predicted=f"{got:,}")
            row["error"] = (got - logged) / logged
        elif "rest_gib" in obs:
            logged_gib, got_gib = obs["rest_gib"], plan.rest_gib
            row.update(kind="budget", observed=f"{logged_gib:.2f} GiB", predicted=f"{got_gib:.2f} GiB")
            row["error"] = (got_gib - logged_gib) / logged_gib
        if "failure_kind" in obs:
            row["failure_observed"] = obs["failure_kind"]
            row["failure_predicted"] = plan.failure.kind if plan.failure else "none (starts)"
        rows.append(row)
    return rows


def accuracy_summary(rows: list[dict]) -> dict:
    errors = sorted(abs(r["error"]) for r in rows if r.get("kind") == "tokens")
    failures = [r for r in rows if "failure_observed" in r]
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    return {
        "cases": len(rows),
        "architectures": len({r["architecture"] for r in rows}),
        "releases": len({r["release"] for r in rows} - {"not logged"}),
        "token_cases": len(errors),
        "within_2pct": sum(e <= 0.02 for e in errors),
        "median_abs_error": median,
        "failures": len(failures),
        "failures_predicted": sum(r["failure_observed"] == r["failure_predicted"] for r in failures),
    }


def render_accuracy_table(rows: list[dict]) -> str:
    lines = [
        "| case (`tests/fixtures/startup_logs/`) | architecture | release | source | setup | inputs | logged "
        "| predicted | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        logged, predicted, error = r.get("observed", ""), r.get("predicted", ""), ""
        if "error" in r:
            error = f"{r['error'] * 100:+.2f}%"
        if "failure_observed" in r:
            logged = (logged + "; " if logged else "") + f"fails: {r['failure_observed']}"
            predicted = (predicted + "; " if predicted else "") + f"fails: {r['failure_predicted']}"
        cells = (
            f"`{r['case']}`",
            r["architecture"],
            r["release"],
            r["source"],
            r["setup"],
            r["inputs"],
            logged,
            predicted,
            error,
        )
        lines.append("| " + " | ".join(cells) + " |")
    s = accuracy_summary(rows)
    lines += [
        "",
        f"{s['cases']} cases over {s['architectures']} architectures and {s['releases']} SGLang releases "
        f"(source.txt says which are inferred); "
        f"token counts within 2%: "
        f"{s['within_2pct']} of {s['token_cases']} ({s['within_2pct'] / s['token_cases']:.0%}), "
        f"median |error| {s['median_abs_error'] * 100:.2f}%; memory failures predicted as the right "
        f"kind: {s['failures_predicted']} of {s['failures']}.",
    ]
    return "\n".join(lines)


def test_docs_accuracy_table_is_the_codes():
    """docs/capacity.md's accuracy table is recomputed here: a change of the planner or of a case that
    moves a figure fails until the table is updated (the expected block is in the failure message)."""
    text = DOC.read_text()
    assert TABLE_START in text and TABLE_END in text, "docs/capacity.md lost its accuracy-table markers"
    block = text[text.index(TABLE_START) + len(TABLE_START) : text.index(TABLE_END)].strip()
    expected = render_accuracy_table(accuracy_rows())
    assert block == expected, "docs/capacity.md accuracy table drifted; replace it with:\n" + expected


def test_every_logged_memory_failure_is_predicted_as_its_kind():
    rows = [r for r in accuracy_rows() if "failure_observed" in r]
    assert rows and all(r["failure_observed"] == r["failure_predicted"] for r in rows)
