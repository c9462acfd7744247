"""Launch command lines checked as a given SGLang release checks them (synthetic and shipped catalogs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from catalog_fixtures import write_catalogs

from sglbench.hostlib import sglang_args, sglang_catalog
from sglbench.hostlib.sglang_args import SglangArgsError, parse_launch_args_or_raise

SHIPPED = sglang_catalog.releases()


@pytest.fixture
def cats(tmp_path: Path) -> str:
    return str(write_catalogs(tmp_path / "catalogs"))


def test_the_planner_view_reads_either_spelling_of_a_renamed_flag(cats: str) -> None:
    old = parse_launch_args_or_raise(
        ["--model-path", "m", "--mamba-scheduler-strategy", "extra_buffer"], "0.5.10", catalog_dir=cats
    )
    new = parse_launch_args_or_raise(
        ["--model-path", "m", "--mamba-radix-cache-strategy", "extra_buffer_lazy"], "0.5.20", catalog_dir=cats
    )
    assert old.mamba_scheduler_strategy == "extra_buffer"
    assert new.mamba_scheduler_strategy == "extra_buffer_lazy"
    assert new.mamba_radix_cache_strategy == "extra_buffer_lazy"
    assert sglang_args.spell(new, "mamba_scheduler_strategy") == "--mamba-radix-cache-strategy"
    assert sglang_args.spell(old, "mamba_scheduler_strategy") == "--mamba-scheduler-strategy"


@pytest.mark.parametrize(
    ("release", "argv", "needles"),
    [
        (
            "0.5.20",
            ["--mamba-scheduler-strategy", "extra_buffer"],
            [
                "not a flag of SGLang 0.5.20",
                "renamed --mamba-radix-cache-strategy in 0.5.20",
                "known in SGLang 0.5.10",
            ],
        ),
        (
            "0.5.10",
            ["--mamba-radix-cache-strategy", "extra_buffer"],
            ["not a flag of SGLang 0.5.10", "spells it --mamba-scheduler-strategy"],
        ),
        ("0.5.10", ["--watchdog-timeout", "600"], ["not a flag of SGLang 0.5.10", "known in SGLang 0.5.20"]),
        ("0.5.20", ["--mem-fraction-statik", "0.8"], ["nearest flag: --mem-fraction-static"]),
        ("0.5.20", ["--m", "x"], ["ambiguous option: --m could match"]),
        ("0.5.20", ["--kv-cache-dtype", "int3"], ["SGLang 0.5.20", "--kv-cache-dtype", "invalid choice"]),
        ("0.5.20", ["--tp-size", "0"], ["--tp-size must be >= 1"]),
        ("0.5.20", ["--mem-fraction-static", "1.5"], ["--mem-fraction-static must be in (0, 1)"]),
        ("0.5.20", ["--speculative-algorithm", "EAGLE3"], ["needs --speculative-draft-model-path"]),
    ],
)
def test_rejections_name_the_release_the_flag_and_the_fix(
    cats: str, release: str, argv: list[str], needles: list[str]
) -> None:
    with pytest.raises(SglangArgsError) as exc:
        parse_launch_args_or_raise(["--model-path", "m", *argv], release, catalog_dir=cats)
    for needle in needles:
        assert needle in str(exc.value)


def test_without_a_release_any_catalogued_release_will_do(cats: str) -> None:
    ns = parse_launch_args_or_raise(["--model-path", "m", "--watchdog-timeout", "600"], catalog_dir=cats)
    assert ns._sglbench_release == "0.5.20" and ns._sglbench_accepted_by == ["0.5.20"]
    both = parse_launch_args_or_raise(["--model-path", "m", "--tp", "2"], catalog_dir=cats)
    assert both._sglbench_accepted_by == ["0.5.10", "0.5.20"]
    with pytest.raises(SglangArgsError, match="no catalogued SGLang release accepts"):
        parse_launch_args_or_raise(
            ["--model-path", "m", "--watchdog-timeout", "1", "--mamba-scheduler-strategy", "auto"],
            catalog_dir=cats,
        )


def test_an_uncatalogued_version_uses_the_nearest_older_release(cats: str) -> None:
    ns = parse_launch_args_or_raise(
        ["--model-path", "m", "--watchdog-timeout", "1"], "0.5.22", catalog_dir=cats
    )
    assert ns._sglbench_release == "0.5.20"


def test_capacity_effect_sorts_the_given_flags(cats: str) -> None:
    ns = parse_launch_args_or_raise(
        [
            "--model",
            "m",
            "--mem-frac",
            "0.8",
            "--reasoning-parser",
            "qwen3",
            "--enable-lora",
            "--watchdog-timeout",
            "600",
        ],
        "0.5.20",
        catalog_dir=cats,
    )
    effect = sglang_args.capacity_effect(ns)
    assert effect["modelled"] == ["--model-path", "--mem-fraction-static"]
    assert effect["none"] == ["--reasoning-parser", "--watchdog-timeout"]
    assert effect["assumed"] and effect["assumed"][0].startswith("--enable-lora: LoRA")


def test_the_exiting_parser_behaves_like_the_release(cats: str) -> None:
    code = (
        "import sys; from sglbench.hostlib.sglang_args import parse_launch_args;"
        "parse_launch_args(['--model-path', 'm', '--bogus-flag', '1'], release='0.5.20',"
        f" catalog_dir={cats!r})"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": "python"},
        check=False,
    )
    assert proc.returncode == 2
    assert "unrecognized arguments: --bogus-flag 1" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "tokens"),
    [
        ([], 0),
        (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"], 4),
        (["--speculative-algorithm", "NGRAM"], 12),
    ],
)
def test_draft_token_count(cats: str, argv: list[str], tokens: int) -> None:
    ns = parse_launch_args_or_raise(["--model-path", "m", *argv], "0.5.20", catalog_dir=cats)
    assert sglang_args.draft_token_count(ns) == tokens


def test_to_argv_round_trips_through_the_parser(cats: str) -> None:
    argv = sglang_args.to_argv(
        {
            "model_path": "/m",
            "--tp-size": 2,
            "disable_radix_cache": True,
            "max_running_requests": None,
            "cuda_graph_bs": [1, 2],
        }
    )
    assert argv == [
        "--model-path",
        "/m",
        "--tp-size",
        "2",
        "--disable-radix-cache",
        "--cuda-graph-bs",
        "1",
        "2",
    ]
    ns = parse_launch_args_or_raise(argv, "0.5.20", catalog_dir=cats)
    assert (ns.tp_size, ns.disable_radix_cache, ns.cuda_graph_bs) == (2, True, [1, 2])


# --- against the shipped catalogs -------------------------------------------------------------------


@pytest.mark.skipif("0.5.23" not in SHIPPED, reason="no 0.5.23 catalog shipped")
def test_shipped_0_5_23_takes_real_launch_lines() -> None:
    ns = parse_launch_args_or_raise(
        [
            "--model-path",
            "Qwen/Qwen3-8B",
            "--reasoning-parser",
            "qwen3",
            "--tool-call-parser",
            "qwen25",
            "--watchdog-timeout",
            "600",
            "--mem-frac",
            "0.8",
            "--tp",
            "2",
            "--context-length",
            "32k",
            "--mamba-radix-cache-strategy",
            "extra_buffer_lazy",
        ],
        "0.5.23",
    )
    assert (ns.tp_size, ns.mem_fraction_static, ns.context_length) == (2, 0.8, 32000)
    assert ns.mamba_scheduler_strategy == "extra_buffer_lazy"
    with pytest.raises(SglangArgsError, match=r"--mamba-scheduler-strategy is not a flag of SGLang 0\.5\.23"):
        parse_launch_args_or_raise(["--model-path", "m", "--mamba-scheduler-strategy", "auto"], "0.5.23")


@pytest.mark.skipif("0.5.23+ddtree" not in SHIPPED, reason="no DDTree overlay shipped")
def test_the_ddtree_build_adds_its_budget_flag() -> None:
    argv = [
        "--model-path",
        "m",
        "--speculative-algorithm",
        "DDTREE",
        "--speculative-draft-model-path",
        "d",
        "--speculative-ddtree-budget",
        "32",
    ]
    ns = parse_launch_args_or_raise(argv, "0.5.23+ddtree")
    assert sglang_args.draft_token_count(ns) == 33
    with pytest.raises(SglangArgsError, match=r"known in SGLang 0\.5\.23\+ddtree"):
        parse_launch_args_or_raise(argv, "0.5.23")


@pytest.mark.skipif("0.5.14" not in SHIPPED, reason="no 0.5.14 catalog shipped")
def test_a_deprecated_alias_reads_into_the_new_field_and_recommendations_use_the_new_spelling() -> None:
    ns = parse_launch_args_or_raise(
        ["--model-path", "m", "--mamba-scheduler-strategy", "extra_buffer", "--cuda-graph-max-bs", "64"],
        "0.5.14",
    )
    assert (ns.mamba_scheduler_strategy, ns.cuda_graph_max_bs) == ("extra_buffer", 64)
    assert sglang_args.spell(ns, "mamba_scheduler_strategy") == "--mamba-radix-cache-strategy"
    assert sglang_args.spell(ns, "cuda_graph_max_bs") == "--cuda-graph-max-bs-decode"


# Flags the planner reads; every release that has one must store it where the planner looks.
PLANNED_FLAGS = (
    "--tp-size", "--dp-size", "--pp-size", "--mem-fraction-static", "--context-length",
    "--max-running-requests", "--max-total-tokens", "--chunked-prefill-size", "--max-prefill-tokens",
    "--page-size", "--kv-cache-dtype", "--mamba-ssm-dtype", "--max-mamba-cache-size",
    "--mamba-full-memory-ratio", "--mamba-scheduler-strategy", "--mamba-radix-cache-strategy",
    "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--disable-radix-cache",
    "--disable-overlap-schedule", "--speculative-algorithm", "--speculative-num-draft-tokens",
    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-draft-model-path",
)  # fmt: skip


@pytest.mark.parametrize("release", SHIPPED)
def test_every_release_stores_the_planned_flags_where_the_planner_reads(release: str) -> None:
    planner = {f for fields, _ in sglang_args.PLANNER_FIELDS.values() for f in fields}
    cat = sglang_catalog.load(release)
    stray = {o: cat.by_option[o].dest for o in PLANNED_FLAGS if o in cat.by_option}
    assert {o: d for o, d in stray.items() if d not in planner} == {}


@pytest.mark.parametrize("release", [r for r in ("0.5.10", "0.5.23") if r in SHIPPED])
def test_parallel_sizes_are_read_on_every_release(release: str) -> None:
    ns = parse_launch_args_or_raise(["--model-path", "m", "--tp-size", "4", "--dp-size", "2"], release)
    assert (ns.tp_size, ns.dp_size, ns.pp_size) == (4, 2, 1)
