"""The pure-torch sgl_kernel CPU ops (scripts/real-sglang/cpu_spec_ops/) against references, one test per op.

torch lives only in the real env, so the cases (tests/real/cpu_spec_ops_cases.py) run once under the
env's interpreter, with this tree's ops on PYTHONPATH (not the env's installed copy) and the env's
LD_LIBRARY_PATH; each test here reads that op's verdicts. When the env's check of the ops against the
installed wheels failed (its one line in cpu-spec-ops.txt), every test skips with that line.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache

import pytest

from real_sglang import HAVE_ENV, NO_REAL_ENV, REPO, ROOT

pytestmark = pytest.mark.real
if not HAVE_ENV:
    pytest.skip(NO_REAL_ENV, allow_module_level=True)

CASES = REPO / "tests" / "real" / "cpu_spec_ops_cases.py"
OPS_DIR = REPO / "scripts" / "real-sglang" / "cpu_spec_ops"
OPS = [
    "copy_all_layer_kv_cache_cpu",
    "decode_attention_cpu",
    "extend_attention_cpu",
    "build_draft_decode_metadata_cpu",
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "assign_req_to_token_pool_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "verify_tree_greedy_cpu",
    "build_tree_kernel_efficient_cpu",
    "reconstruct_indices_from_tree_mask_cpu",
    "rotate_input_ids_cpu",
]


def env_verdict() -> str:
    path = ROOT / "cpu-spec-ops.txt"
    return path.read_text().strip() if path.is_file() else f"no {path}: run `make real-sglang`"


@cache
def verdicts() -> dict[str, str]:
    script = 'source "$1/env.sh" && PYTHONPATH="$2" exec "$1/venv/bin/python" "$3"'
    proc = subprocess.run(
        ["bash", "-c", script, "cases", str(ROOT), str(OPS_DIR), str(CASES)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        pytest.fail(f"the cases did not run (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def test_the_ops_were_installed_by_the_hook() -> None:
    if not env_verdict().startswith("ok:"):
        pytest.skip(env_verdict())
    assert verdicts()["test_installed"] == "ok"


def test_the_check_passes_here_and_names_a_mismatch_in_one_line() -> None:
    if not env_verdict().startswith("ok:"):
        pytest.skip(env_verdict())
    mine = {n: v for n, v in verdicts().items() if n.startswith("test_check_")}
    assert len(mine) == 2 and all(v == "ok" for v in mine.values()), mine


@pytest.mark.parametrize("op", OPS)
def test_op_matches_its_reference(op: str) -> None:
    if not env_verdict().startswith("ok:"):
        pytest.skip(env_verdict())
    mine = {name: v for name, v in verdicts().items() if name.removeprefix("test_").startswith(op)}
    assert mine, f"no case for {op}"
    assert all(v == "ok" for v in mine.values()), mine


def test_every_case_belongs_to_an_op() -> None:
    if not env_verdict().startswith("ok:"):
        pytest.skip(env_verdict())
    others = ("test_installed", "test_check_")
    stray = [
        n for n in verdicts() if not n.startswith(others) and not any(n[5:].startswith(op) for op in OPS)
    ]
    assert not stray
