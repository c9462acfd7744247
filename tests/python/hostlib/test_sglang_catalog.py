"""Catalog loading, release selection, overlays and the rebuilt argparse parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from catalog_fixtures import BASE_FLAGS, catalog_doc, write_catalogs

from sglbench.hostlib import sglang_catalog, sglang_parser_dump
from sglbench.hostlib.sglang_catalog import CatalogError


@pytest.mark.parametrize(
    "ordered",
    [
        [
            "0.4.10",
            "0.4.10.post2",
            "0.5.2",
            "0.5.10",
            "0.5.10.post1",
            "0.5.11rc1",
            "0.5.11",
            "0.5.23",
            "0.5.23+ddtree",
        ],
    ],
)
def test_versions_sort_like_pep440(ordered: list[str]) -> None:
    assert sglang_catalog.sort_versions(reversed(ordered)) == ordered


@pytest.mark.parametrize(
    ("installed", "chosen", "exact"),
    [
        ("0.5.20", "0.5.20", True),
        ("0.5.15", "0.5.10", False),  # not catalogued: the newest older one
        ("0.5.20.post3", "0.5.20", False),
        ("0.5.99", "0.5.20", False),
        ("0.4.0", "0.5.10", False),  # older than everything: the oldest
        ("0.5.20+mybuild", "0.5.20", False),  # a local build without its own catalog: its base
    ],
)
def test_select_release(installed: str, chosen: str, exact: bool) -> None:
    assert sglang_catalog.select_release(installed, ["0.5.10", "0.5.20"]) == (chosen, exact)


def test_releases_and_load_read_a_directory(tmp_path: Path) -> None:
    write_catalogs(tmp_path)
    assert sglang_catalog.releases(str(tmp_path)) == ["0.5.10", "0.5.20"]
    cat = sglang_catalog.load("0.5.20", str(tmp_path))
    assert "--mamba-radix-cache-strategy" in cat.by_option
    assert cat.by_option["--model"].dest == "model_path"
    renames = sglang_catalog.load_renames(str(tmp_path))
    assert [(r.old, r.new) for r in renames] == [
        ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy")
    ]
    with pytest.raises(CatalogError, match=r"no catalog for SGLang 0\.9\.9 .*catalogued: 0\.5\.10, 0\.5\.20"):
        sglang_catalog.load("0.9.9", str(tmp_path))


def test_an_overlay_extends_its_release(tmp_path: Path) -> None:
    write_catalogs(tmp_path)
    overlay = {
        "schema": sglang_catalog.SCHEMA,
        "release": "0.5.20+ddtree",
        "extends": "0.5.20",
        "method": "overlay",
        "flags": [
            {
                "opts": ["--speculative-ddtree-budget"],
                "dest": "speculative_ddtree_budget",
                "action": "store",
                "type": "int",
            }
        ],
    }
    (tmp_path / "0.5.20+ddtree.json").write_text(json.dumps(overlay))
    cat = sglang_catalog.load("0.5.20+ddtree", str(tmp_path))
    assert "--speculative-ddtree-budget" in cat.by_option and "--watchdog-timeout" in cat.by_option
    assert cat.method == "parser+overlay"
    doc = sglang_catalog.catalog_to_dict(cat)
    assert sglang_catalog.catalog_from_dict(doc).by_option.keys() == cat.by_option.keys()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json", "cannot read"),
        (json.dumps({"schema": "other", "release": "x", "flags": []}), "not an SGLang flag catalog"),
        (
            json.dumps({"schema": sglang_catalog.SCHEMA, "release": "x", "flags": [{"opts": ["--a"]}]}),
            "lacks",
        ),
        (
            json.dumps(
                {
                    "schema": sglang_catalog.SCHEMA,
                    "release": "x",
                    "flags": [{"opts": ["--a"], "dest": "a", "action": "frobnicate"}],
                }
            ),
            "unknown action",
        ),
    ],
)
def test_bad_catalog_files_name_the_file(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "0.1.0.json"
    path.write_text(content)
    with pytest.raises(CatalogError, match=needle):
        sglang_catalog.load_file(str(path))


def _parser(abbrev: bool = True) -> argparse.ArgumentParser:
    cat = sglang_catalog.catalog_from_dict(catalog_doc("0.5.20", BASE_FLAGS, abbrev))
    return sglang_catalog.build_parser(cat, raising=True)


def test_rebuilt_parser_converts_and_checks_like_the_release() -> None:
    ns = _parser().parse_args(
        [
            "--model",
            "m",
            "--tp",
            "2",
            "--page-size",
            "16",
            "--cuda-graph-bs",
            "1",
            "2",
            "--no-enable-metrics",
            "--json-model-override-args",
            '{"a": 1}',
            "--max-total-tokens",
            "12k",
        ]
    )
    assert (ns.model_path, ns.tp_size, ns.page_size, ns.cuda_graph_bs) == ("m", 2, 16, [1, 2])
    assert ns.enable_metrics is False and ns.json_model_override_args == {"a": 1}
    assert ns.max_total_tokens == 12000  # SGLang's human_readable_int
    assert ns.disable_radix_cache is False
    with pytest.raises(ValueError, match="invalid choice: 3"):
        _parser().parse_args(["--model", "m", "--page-size", "3"])
    with pytest.raises(ValueError, match="required"):
        _parser().parse_args(["--tp-size", "2"])


def test_abbreviations_follow_the_release() -> None:
    assert _parser(abbrev=True).parse_args(["--model-p", "m", "--mem-frac", "0.5"]).mem_fraction_static == 0.5
    with pytest.raises(ValueError, match="unrecognized arguments: --mem-frac"):
        _parser(abbrev=False).parse_args(["--model-path", "m", "--mem-frac", "0.5"])


def test_human_readable_int_matches_sglang() -> None:
    h = sglang_catalog.human_readable_int
    assert (h("32k"), h("1Ki"), h("25.6k"), h("40960"), h("2M")) == (32000, 1024, 25600, 40960, 2_000_000)
    for bad in ("1.5Ki", "32K", "ten"):
        with pytest.raises(argparse.ArgumentTypeError):
            h(bad)


def test_a_parser_dumps_back_to_its_catalog() -> None:
    """parser -> catalog (the conversion run on hosts and by scripts/sglang_catalog.py) -> parser."""
    doc = catalog_doc("0.5.20", BASE_FLAGS)
    parser = argparse.ArgumentParser(prog="x")
    sglang_catalog.add_arguments(parser, sglang_catalog.catalog_from_dict(doc))
    dumped = sglang_parser_dump.catalog_from_parser(parser, "0.5.20")
    back = {tuple(f["opts"]): f for f in dumped["flags"]}
    for flag in BASE_FLAGS:
        got = back[tuple(flag["opts"])]
        assert got["dest"] == flag["dest"] and got["action"] == flag["action"], flag
        assert got.get("choices") == (sorted(flag["choices"]) if "choices" in flag else None), flag
        if flag.get("type") in ("int", "float", "str", "json"):
            assert got.get("type") == flag["type"], flag


def test_option_tokens_stop_at_a_double_dash() -> None:
    assert sglang_catalog.option_tokens(["--a", "1", "--b=2", "x", "--", "--c"]) == [(0, "--a"), (2, "--b")]


def test_render_catalog_writes_one_flag_per_line_and_loads_back() -> None:
    flags = [
        {"opts": ["--a"], "dest": "a", "action": "store_true"},
        {"opts": ["--b"], "dest": "b", "action": "store", "help_hash": "é"},
    ]
    text = sglang_catalog.render_catalog({"schema": sglang_catalog.SCHEMA, "release": "1"}, flags)
    assert text.count("\n") == 6 and "é" in text  # kept as written, not \u-escaped
    assert sglang_catalog.catalog_from_dict(json.loads(text)).release == "1"
    rows = [{"old": "--x", "new": "--y"}]
    renames = sglang_catalog.render_renames(rows)
    assert json.loads(renames) == {"schema": sglang_catalog.RENAMES_SCHEMA, "renames": rows}
