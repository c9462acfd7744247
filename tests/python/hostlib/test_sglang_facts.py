"""hostlib/sglang_facts.py: the one home of each SGLang fact, and drift tests for every copy of it.

Copies that cannot import the table (role argument specs, docs, templates, the stand-in README)
are parsed here and compared with it, so changing one copy without the table (or the table
without the copies) fails this file.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sglbench.hostlib import capacity, gpus, sglang_args, sglang_defaults
from sglbench.hostlib import sglang_facts as facts
from sglbench.hostlib.sglang_facts import SpecFlagError, draft_token_count

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "tests" / "fixtures" / "models"


def ns(**flags: Any) -> argparse.Namespace:
    """Parsed flags as the planner reads them (unset = None); only the speculative fields matter."""
    fields = (
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_dflash_block_size",
        "speculative_ddtree_budget",
    )
    return argparse.Namespace(**{f: flags.pop(f, None) for f in fields}, **flags)


# --- the table ------------------------------------------------------------------------------------


def test_table_declares_each_algorithm_once_with_the_exported_names() -> None:
    names = [a.name for a in facts.SPEC_TABLE]
    assert len(names) == len(set(names))
    assert facts.SPEC_ALGORITHMS == ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DDTREE")
    assert frozenset({"EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE"}) == facts.DRAFT_MODEL_ALGORITHMS
    assert ("none", *facts.SPEC_ALGORITHMS) == facts.MATRIX_ALGORITHMS
    for row in facts.SPEC_TABLE:
        assert row.runs_as in facts.SPEC_BY_NAME
        assert row.family in (facts.FAMILY_EAGLE, facts.FAMILY_DFLASH, facts.FAMILY_NGRAM)
        assert row.kv_fold in (facts.KV_FOLD_NONE, facts.KV_FOLD_DRAFT_CELL, facts.KV_FOLD_LAYER_RATIO)
        assert row.since and row.provenance
    assert facts.spec_algorithm("nextn").runs_as == "EAGLE"
    with pytest.raises(SpecFlagError, match="MEDUSA"):
        facts.spec_algorithm("MEDUSA")


def test_startup_reservation_matches_the_planners_reserve() -> None:
    assert [facts.startup_reserve_mib(a) for a in (None, "NGRAM", "EAGLE", "DFLASH", "STANDALONE")] == [
        0,
        0,
        4096,
        4096,
        6144,
    ]
    era = sglang_defaults.Era0510()

    def reserved(algo: str | None) -> float:
        d = sglang_defaults.DefaultsInputs(97887, 1, 1, algo, False, False, 0, None, 16384, True, False)
        return era.reserved_mib(8192, 256, d)

    for algo in facts.SPEC_ALGORITHMS:
        assert reserved(algo) - reserved(None) == facts.spec_algorithm(algo).startup_reserve_mib


def test_parser_exports_the_same_algorithms() -> None:
    """sglang_args re-exports (or, until it is switched, repeats) the table's lists."""
    assert tuple(sglang_args.SPEC_ALGORITHMS) == facts.SPEC_ALGORITHMS
    assert frozenset(sglang_args.DRAFT_MODEL_ALGORITHMS) == facts.DRAFT_MODEL_ALGORITHMS


def test_parser_counts_draft_tokens_with_the_one_rule() -> None:
    assert sglang_args.draft_token_count is facts.draft_token_count


# --- the draft-token rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "draft_cfg", "arch", "tokens"),
    [
        ({}, None, None, 0),
        # DFLASH: flag, alias, draft config (top level or dflash_config), else 16
        ({"speculative_algorithm": "DFLASH"}, None, None, 16),
        ({"speculative_algorithm": "DFLASH", "speculative_dflash_block_size": 8}, None, None, 8),
        ({"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}, None, None, 8),
        ({"speculative_algorithm": "DFLASH"}, {"block_size": 10}, None, 10),
        ({"speculative_algorithm": "DFLASH"}, {"dflash_config": {"block_size": 12}}, None, 12),
        # DDTREE: budget + 1, budget default block - 1
        ({"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 32}, None, None, 33),
        ({"speculative_algorithm": "DDTREE"}, {"block_size": 10}, None, 10),
        # NGRAM: 12 unless given
        ({"speculative_algorithm": "NGRAM"}, None, None, 12),
        ({"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 6}, None, None, 6),
        # EAGLE family: auto by architecture when all three are unset
        ({"speculative_algorithm": "EAGLE3"}, None, "Qwen3ForCausalLM", 4),
        ({"speculative_algorithm": "EAGLE"}, None, "LlamaForCausalLM", 8),
        ({"speculative_algorithm": "NEXTN"}, None, None, 4),
        ({"speculative_algorithm": "STANDALONE"}, None, "Grok1ForCausalLM", 8),
        # topk 1 (given or unset): steps + 1, even over an explicit draft-token count
        ({"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5}, None, None, 6),
        (
            {
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 10,
            },
            None,
            "LlamaForCausalLM",
            4,
        ),
        # topk > 1: the draft-token count as given
        (
            {
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": 5,
                "speculative_eagle_topk": 4,
                "speculative_num_draft_tokens": 16,
            },
            None,
            "LlamaForCausalLM",
            16,
        ),
        (
            {
                "speculative_algorithm": "STANDALONE",
                "speculative_num_steps": 4,
                "speculative_eagle_topk": 2,
                "speculative_num_draft_tokens": 7,
            },
            None,
            None,
            7,
        ),
    ],
)
def test_draft_token_count(
    flags: dict[str, Any], draft_cfg: dict | None, arch: str | None, tokens: int
) -> None:
    assert draft_token_count(ns(**flags), draft_cfg, arch) == tokens


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (
            {"speculative_algorithm": "EAGLE", "speculative_num_steps": 5, "speculative_eagle_topk": 4},
            "--speculative-num-draft-tokens",
        ),
        (
            {
                "speculative_algorithm": "DFLASH",
                "speculative_dflash_block_size": 8,
                "speculative_num_draft_tokens": 16,
            },
            "--speculative-dflash-block-size",
        ),
        ({"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 0}, "--speculative-ddtree-budget"),
        ({"speculative_algorithm": "MEDUSA"}, "--speculative-algorithm"),
    ],
)
def test_draft_token_count_names_the_flag_sglang_would_reject(flags: dict[str, Any], flag: str) -> None:
    with pytest.raises(SpecFlagError) as err:
        draft_token_count(ns(**flags), None, "LlamaForCausalLM")
    assert err.value.flag == flag


def test_namespace_without_a_releases_field_counts_it_as_unset() -> None:
    assert draft_token_count(argparse.Namespace(speculative_algorithm="dflash")) == 16


def _plan(*flags: str, model: str = "llama-3.1-8b-instruct", draft: str | None = None) -> capacity.Plan:
    argv = ["--model-path", str(MODELS / model), *flags]
    if draft:
        argv += ["--speculative-draft-model-path", str(MODELS / draft)]
    args = sglang_args.parse_launch_args_or_raise(argv)
    cfg = capacity.read_config(str(MODELS / model), "--model-path")
    dcfg = capacity.read_config(str(MODELS / draft), "--speculative-draft-model-path") if draft else None
    return capacity.plan(args, cfg, dcfg, gpus.find_gpu("H100").memory_gib, recommend=False)


def test_planner_eagle_topk_above_one_needs_the_draft_token_count() -> None:
    """SGLang's rule (sglang.md §1.1): with topk > 1 the draft-token count is not derived."""
    tree = (
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
    )
    with pytest.raises(capacity.PlanError) as err:
        _plan(*tree, draft="llama-3.1-8b-instruct")
    assert err.value.field == "--speculative-num-draft-tokens"
    given = _plan(*tree, "--speculative-num-draft-tokens", "16", draft="llama-3.1-8b-instruct")
    assert given.num_draft_tokens == 16


def test_planner_uses_the_architecture_for_eagle_auto_parameters() -> None:
    assert _plan("--speculative-algorithm", "EAGLE3", draft="llama-3.1-8b-instruct").num_draft_tokens == 8
    qwen = _plan("--speculative-algorithm", "EAGLE3", model="qwen3-8b", draft="qwen3-8b")
    assert qwen.num_draft_tokens == 4
    chain = (
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "9",
    )
    assert (
        _plan("--speculative-algorithm", "EAGLE3", *chain, draft="llama-3.1-8b-instruct").num_draft_tokens
        == 3
    )


# --- copies in role argument specs ------------------------------------------------------------------


def _options(spec: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (dotted name, option) of an argument_specs entry, nested options included."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, opt in ((spec or {}).get("options") or {}).items():
        if isinstance(opt, dict):
            out.append((f"{path}{name}", opt))
            out += _options(opt, f"{path}{name}.")
    return out


def _all_role_options() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for file in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
        for entry in (doc.get("argument_specs") or {}).values():
            for name, opt in _options(entry):
                found.append((str(file.relative_to(REPO)), name, opt))
    return found


def _description(opt: dict[str, Any]) -> str:
    desc = opt.get("description", "")
    return " ".join(desc) if isinstance(desc, list) else str(desc)


def _names_after(text: str, marker: str) -> list[str]:
    """The comma-separated upper-case names right after ``marker`` (e.g. ``required for``)."""
    m = re.search(re.escape(marker) + r"\s+((?:[A-Z][A-Z0-9]*(?:,\s*|\s+and\s+|\b))+)", text)
    assert m, f"{marker!r} not followed by algorithm names in {text!r}"
    return re.findall(r"[A-Z][A-Z0-9]*", m.group(1))


def test_role_algorithm_choices_are_the_table() -> None:
    algo_opts = [
        (f, n, o)
        for f, n, o in _all_role_options()
        if n.rsplit(".", 1)[-1] == "algorithm" or set(o.get("choices") or []) & set(facts.SPEC_ALGORITHMS)
    ]
    assert algo_opts, "no argument_specs option lists the speculative algorithms any more"
    for file, name, opt in algo_opts:
        assert opt.get("choices") == ["none", *facts.SPEC_ALGORITHMS], f"{file}: {name}"
        assert opt.get("default", "none") == facts.NO_SPEC, f"{file}: {name}"


def test_role_draft_path_descriptions_list_the_draft_algorithms() -> None:
    drafts = [(f, n, o) for f, n, o in _all_role_options() if "required for" in _description(o)]
    assert drafts, "no argument_specs option says which algorithms need a draft model"
    for file, name, opt in drafts:
        listed = _names_after(_description(opt), "required for")
        assert listed == [a for a in facts.SPEC_ALGORITHMS if a in facts.DRAFT_MODEL_ALGORITHMS], (
            f"{file}: {name}"
        )


def test_role_ready_endpoints_are_the_readiness_path() -> None:
    ready = [(f, n, o) for f, n, o in _all_role_options() if n.endswith("ready_endpoint")]
    assert ready
    for file, name, opt in ready:
        assert opt.get("default") == facts.READY_ENDPOINT, f"{file}: {name}"
        defaults = yaml.safe_load((REPO / Path(file).parents[1] / "defaults" / "main.yml").read_text())
        assert defaults[name] == facts.READY_ENDPOINT, f"{file}: defaults/main.yml {name}"


def test_module_docs_defaults_are_the_table() -> None:
    wait_ready = (REPO / "plugins" / "modules" / "sglbench_wait_ready.py").read_text(encoding="utf-8")
    doc = yaml.safe_load(
        ast.literal_eval(re.search(r'DOCUMENTATION = (r""".*?""")', wait_ready, re.S).group(1))
    )
    assert doc["options"]["endpoint"]["default"] == facts.READY_ENDPOINT


# --- copies in the docs ---------------------------------------------------------------------------


def _table_row(path: Path, first_cell: str) -> list[str]:
    """The cells of the markdown table row whose first cell is ``first_cell``."""
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"{path.relative_to(REPO)}: no table row {first_cell!r}")


def _backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_ansible_doc_lists_the_algorithms() -> None:
    doc = REPO / "docs" / "ansible.md"
    assert _backticked(_table_row(doc, "`algorithm`")[2]) == list(facts.MATRIX_ALGORITHMS)
    draft = _table_row(doc, "`draft_model_path`")[1]
    assert _names_after(draft, "for") == [
        a for a in facts.SPEC_ALGORITHMS if a in facts.DRAFT_MODEL_ALGORITHMS
    ]


def test_records_doc_lists_the_algorithms() -> None:
    meaning = _table_row(REPO / "docs" / "records.md", "`config`")[2]
    m = re.search(r"`algorithm` \(([^)]*)\)", meaning)
    assert m, "docs/records.md: config row no longer lists the algorithm values"
    assert _backticked(m.group(1)) == list(facts.MATRIX_ALGORITHMS)


def test_sim_readme_accept_lengths_are_the_table() -> None:
    meaning = _table_row(REPO / "python" / "sglbench" / "sim" / "README.md", "`SGLBENCH_SIM_ACCEPT_LENGTH`")[
        2
    ]
    pairs = re.findall(r"\b([A-Z][A-Z0-9]*\*?) (\d+(?:\.\d+)?)\b", meaning)
    documented = {name: float(value) for name, value in pairs}
    assert documented == {a.name: a.sim_accept_length for a in facts.SPEC_TABLE}


def test_capacity_doc_lists_the_gpu_kinds() -> None:
    meaning = _table_row(REPO / "docs" / "capacity.md", "`--gpu NAME` / `--gpu-mem-gib G`")[1]
    listed = _backticked(meaning[: meaning.index(")")])
    assert listed == gpus.known_names()
    for name, mib in re.findall(r"`([^`]+)` ([\d,]+)", meaning):
        assert gpus.find_gpu(name).memory_mib == int(mib.replace(",", "")), name


def test_sim_readme_gpu_keys_are_the_table() -> None:
    meaning = _table_row(REPO / "python" / "sglbench" / "sim" / "README.md", "`SGLBENCH_SIM_GPU`")[2]
    keys = re.search(r"a key \(([^)]*)\)", meaning)
    assert keys and keys.group(1).split(", ") == [k.key for k in gpus.GPU_KINDS]


# --- GPU kinds ------------------------------------------------------------------------------------


def test_one_gpu_table_serves_planner_and_stand_in() -> None:
    from sglbench.sim import gpus as sim_gpus
    from sglbench.sim import settings as sim_settings

    assert sim_gpus.GPU_KINDS is gpus.GPU_KINDS
    for kind in gpus.GPU_KINDS:
        assert kind.memory_mib > 0 and kind.bandwidth_gbps > 0 and kind.bf16_tflops > 0 and kind.smi_name
        for spelling in (kind.name, kind.key, kind.smi_name, *kind.aliases):
            assert gpus.find_gpu(spelling) is kind, spelling
            got = sim_gpus.gpu_kind(sim_settings.load_settings({"SGLBENCH_SIM_GPU": spelling}))
            assert got == kind, spelling


# --- endpoints and schema ids: declared once ------------------------------------------------------


def test_endpoint_table_names_every_path_once() -> None:
    paths = [e.path for e in facts.ENDPOINTS]
    assert len(paths) == len(set(paths))
    for group in (
        facts.HEALTH_ENDPOINTS,
        facts.SERVER_INFO_ENDPOINTS,
        facts.MODEL_INFO_ENDPOINTS,
        facts.AUTH_EXEMPT_ENDPOINTS,
        tuple(facts.API_PATHS.values()),
        (facts.READY_ENDPOINT,),
    ):
        assert set(group) <= set(paths)


_SCHEMA_RE = re.compile(r"\bsglbench\.[a-z_]+/\d+\b")
_SCHEMA_COPIES = ("docs", "roles", "plugins", "molecule", "playbooks", "README.md", "python")


def test_every_schema_id_in_the_tree_is_declared() -> None:
    """A result schema id bumped in a template, doc or module doc but not in the table (or vice versa)
    fails. Ids of other families (e.g. the flag catalogs' ``sglbench.sglang_catalog/1``) are not results."""
    families = {s.split("/")[0] for s in facts.SCHEMAS}
    seen: set[str] = set()
    for top in _SCHEMA_COPIES:
        root = REPO / top
        files = (
            [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        )
        for file in files:
            if file.suffix not in (".py", ".md", ".yml", ".yaml", ".j2", ".json"):
                continue
            for found in _SCHEMA_RE.findall(file.read_text(encoding="utf-8", errors="replace")):
                if found.split("/")[0] not in families:
                    continue
                assert found in facts.SCHEMAS, (
                    f"{file.relative_to(REPO)}: {found} is not in sglang_facts.SCHEMAS"
                )
                seen.add(found)
    assert {facts.ATTEMPT_SCHEMA, facts.BENCH_SCHEMA, facts.POINT_SCHEMA} <= seen
    from sglbench.hostlib import result_schema

    facts_in = result_schema.RecordFacts(run_id="r", host="h", instance={"name": "a-tp1"}, outcome="ok")
    built = facts_in.to_dict()
    assert built["schema"] == facts.ATTEMPT_SCHEMA  # the record is built from the declared id


# Sources that may still spell a fact out: sglang_facts itself; sglang_args until it re-exports the
# table (its lists are compared above).
_LITERAL_ALLOWED = {"python/sglbench/hostlib/sglang_facts.py"}


def _python_sources() -> list[Path]:
    files = [*(REPO / "python" / "sglbench").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]
    return [f for f in files if not f.is_symlink() and str(f.relative_to(REPO)) not in _LITERAL_ALLOWED]


def test_no_python_source_repeats_an_endpoint_path_or_schema_id() -> None:
    declared = {e.path for e in facts.ENDPOINTS} | set(facts.SCHEMAS)
    stray = []
    for file in _python_sources():
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in declared:
                stray.append(f"{file.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not stray, "use sglang_facts instead of: " + "; ".join(stray)


def test_no_python_source_keeps_its_own_list_of_algorithms() -> None:
    known = set(facts.SPEC_ALGORITHMS)
    stray = []
    for file in _python_sources():
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in known]
                if len(names) >= 2:
                    stray.append(f"{file.relative_to(REPO)}:{node.lineno}: {names}")
    assert not stray, "derive these from sglang_facts.SPEC_TABLE: " + "; ".join(stray)
