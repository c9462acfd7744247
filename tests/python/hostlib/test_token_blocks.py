"""Token blocks: prompts named by shared blocks and their own filler, built the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglbench.hostlib import prompts, token_blocks
from sglbench.hostlib.token_blocks import BLOCK_TOKENS, TokenBlocks


def test_length_is_exact_and_ids_stay_in_range():
    for length in (1, BLOCK_TOKENS - 1, BLOCK_TOKENS, 3 * BLOCK_TOKENS + 7):
        ids = TokenBlocks((4, 9), length, "a").token_ids()
        assert len(ids) == length
        lo, hi = token_blocks.TOKEN_ID_RANGE
        assert all(lo <= t < hi for t in ids)


def test_same_block_ids_share_a_prefix_and_the_filler_is_the_prompts_own():
    a = TokenBlocks((46, 47, 2353), 3 * BLOCK_TOKENS, "req-1").token_ids()
    b = TokenBlocks((46, 47, 9999), 3 * BLOCK_TOKENS, "req-2").token_ids()
    assert a[: 2 * BLOCK_TOKENS] == b[: 2 * BLOCK_TOKENS]  # blocks 46 and 47: the same tokens
    assert a[2 * BLOCK_TOKENS :] != b[2 * BLOCK_TOKENS :]
    c = TokenBlocks((46,), BLOCK_TOKENS + 100, "req-3").token_ids()
    d = TokenBlocks((46,), BLOCK_TOKENS + 100, "req-4").token_ids()
    assert c[:BLOCK_TOKENS] == d[:BLOCK_TOKENS] and c[BLOCK_TOKENS:] != d[BLOCK_TOKENS:]
    # A shorter request cuts its last block: its ids are a prefix of the longer one's.
    assert TokenBlocks((46, 47), 700, "x").token_ids() == a[:700]
    # Different blocks, different heads (what a prefix cache compares first).
    assert TokenBlocks((1,), 8, "").token_ids() != TokenBlocks((2,), 8, "").token_ids()


def test_ids_do_not_depend_on_the_process(tmp_path: Path):
    """The host builds what the controller named: no per-process hash seed may enter the ids."""
    code = (
        "from sglbench.hostlib.token_blocks import TokenBlocks;"
        "print(sum(TokenBlocks((7, 8), 1500, 'salt').token_ids()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(Path(token_blocks.__file__).parents[2])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == sum(TokenBlocks((7, 8), 1500, "salt").token_ids())


def test_record_round_trip_and_kind():
    rec = {
        "id": "t:1",
        "category": "trace",
        "token_blocks": {"blocks": [1, 2], "length": 600, "salt": "t:1"},
        "max_new_tokens": 12,
        "arrival_s": 1.5,
    }
    p = prompts.parse_prompt_record(rec, "here", "d")
    assert p.kind == "input_ids" and p.max_new_tokens == 12 and p.arrival_s == 1.5
    assert len(p.token_ids()) == 600
    assert prompts.parse_prompt_record(p.to_param(), "here", "d") == p
    with pytest.raises(prompts.PromptError, match="token ids only"):
        p.as_text()


@pytest.mark.parametrize(
    "field, value, msg",
    [
        ("token_blocks", {"blocks": [1], "length": 0}, "'token_blocks.length' must be an integer"),
        ("token_blocks", {"blocks": [-1], "length": 4}, "'token_blocks.blocks' entries"),
        ("token_blocks", {"blocks": "1,2", "length": 4}, "'token_blocks.blocks' must be a list"),
        ("token_blocks", [1, 2], "'token_blocks' must be an object"),
        ("max_new_tokens", 0, "'max_new_tokens' must be an integer >= 1"),
        ("arrival_s", -1.0, "'arrival_s' must be a finite number"),
        ("arrival_s", float("nan"), "'arrival_s' must be a finite number"),
    ],
)
def test_bad_fields_are_one_line_errors_naming_the_field(field, value, msg):
    rec = {"id": "x", "token_blocks": {"blocks": [], "length": 4}, field: value}
    with pytest.raises(prompts.PromptError, match=msg) as err:
        prompts.parse_prompt_record(rec, "f.jsonl:3", "d")
    assert str(err.value).startswith("f.jsonl:3: ") and "\n" not in str(err.value)
