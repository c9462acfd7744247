"""The stand-in impersonates a chosen SGLang release: flags, version string, accounting, ignored flags,
and the shim's ``sglang.srt.server_args`` parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sim_harness import PYTHON_SRC, REPO, Sim, launch, model, sim_env

from sglbench.hostlib import (
    plan_inputs,
    server_api,
    sglang_args,
    sglang_catalog,
    sglang_logs,
    sglang_parser_dump,
)
from sglbench.sim import release, server, settings

SHIM = PYTHON_SRC / "sglbench" / "sim" / "sglang_shim"
OLD_RELEASE = "0.5.10.post1"  # last release with --mamba-scheduler-strategy only (and accounting A)
IGNORED = ["--reasoning-parser", "qwen3", "--tool-call-parser", "qwen25", "--watchdog-timeout", "600"]


def need_catalog(version: str) -> None:
    if version not in sglang_catalog.releases():
        pytest.skip(f"no flag catalog for SGLang {version} yet (python/sglbench/hostlib/sglang_catalogs/)")


def run_to_exit(tmp_path: Path, args: list[str], **env: str) -> tuple[int, str]:
    sim = launch(tmp_path, args, wait_ready=False, **env)
    try:
        code = sim.wait_exit(20)
    finally:
        sim.stop()
    return code, sim.log()


def one_line(log: str, needle: str) -> str:
    lines = [line for line in log.splitlines() if needle in line]
    assert len(lines) == 1, f"{needle!r} on {len(lines)} lines:\n{log}"
    return lines[0]


# --- flags of the impersonated release ------------------------------------------------------------


def test_0523_refuses_the_old_mamba_flag_like_argparse(tmp_path: Path) -> None:
    need_catalog("0.5.23")
    args = ["--model-path", model("qwen3.6-27b"), "--mamba-scheduler-strategy", "extra_buffer"]
    code, log = run_to_exit(tmp_path, args, SGLBENCH_SIM_SGLANG_VERSION="0.5.23")
    assert code == 2
    assert "usage: python -m sglbench.sim [-h]" in log
    assert (
        "python -m sglbench.sim: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer"
        in log
    )
    assert "Load weight begin" not in log
    assert sglang_logs.classify_failure(log)["cause"] == "bad_args"


def test_older_release_takes_the_old_spelling_and_refuses_the_new_one(tmp_path: Path, start_sim) -> None:
    need_catalog(OLD_RELEASE)
    hybrid = ["--model-path", model("qwen3.6-27b"), "--context-length", "32768"]
    env = {"SGLBENCH_SIM_SGLANG_VERSION": OLD_RELEASE, "SGLBENCH_SIM_ACCOUNTING": ""}
    code, log = run_to_exit(
        tmp_path / "new", [*hybrid, "--mamba-radix-cache-strategy", "extra_buffer"], **env
    )
    assert code == 2 and "error: unrecognized arguments: --mamba-radix-cache-strategy extra_buffer" in log

    sim: Sim = start_sim([*hybrid, "--mamba-scheduler-strategy", "extra_buffer"], **env)
    status, info = sim.json("/server_info")
    assert status == 200
    assert info["version"] == OLD_RELEASE
    assert info["sglbench_sim"]["impersonates"] == OLD_RELEASE
    assert info["sglbench_sim"]["flags_release"] == OLD_RELEASE
    assert info["sglbench_sim"]["accounting"] == "A"  # the version's own variant
    assert info["mamba_scheduler_strategy"] == "extra_buffer"  # the release's field name
    assert "mamba_radix_cache_strategy" not in info
    assert "impersonating SGLang 0.5.10.post1, memory accounting A" in sim.log()
    assert "accepted and ignored" not in sim.log()  # every flag given is simulated
    # what only 0.5.23 was checked against (tests/contract) stays as before for older releases
    assert sim.json("/get_load")[0] == 200
    assert "Init torch distributed ends" in sim.log() and "Using KV cache dtype" in sim.log()
    assert "Init parallel" not in sim.log() and "Engine startup timings" not in sim.log()
    assert isinstance(info["internal_states"][0]["memory_usage"]["graph"], float)
    assert "launch_command" not in info


def test_0523_reports_its_version_and_its_own_field_names(start_sim) -> None:
    need_catalog("0.5.23")
    sim: Sim = start_sim(
        ["--model-path", model("qwen3.6-27b"), "--mamba-radix-cache-strategy", "extra_buffer"],
        SGLBENCH_SIM_SGLANG_VERSION="0.5.23",
        SGLBENCH_SIM_ACCOUNTING="",
    )
    for path in ("/server_info", "/get_server_info"):
        status, info = sim.json(path)
        assert status == 200 and info["version"] == "0.5.23"
        assert info["sglbench_sim"]["simulated"] is True and info["sglbench_sim"]["accounting"] == "C"
        assert info["mamba_radix_cache_strategy"] == "extra_buffer"
        # 0.5.23's ServerArgs has no mamba_scheduler_strategy / cuda_graph_max_bs fields
        assert "mamba_scheduler_strategy" not in info and "cuda_graph_max_bs" not in info
        # 0.5.23 keeps the flag as given (unset: None); the resolved value is in cuda_graph_config
        assert info["cuda_graph_max_bs_decode"] is None
        decode_graphs = info["cuda_graph_config"]["decode"]
        assert decode_graphs["backend"] == "full" and decode_graphs["max_bs"] > 0
    normalised = server_api.normalise_server_info(info)  # what records keep: the same view for every release
    assert normalised["cuda_graph_max_bs"] == decode_graphs["max_bs"]
    assert normalised["mamba"]["mamba_scheduler_strategy"] == "extra_buffer"
    assert sim.json("/get_load")[0] == 404  # 0.5.23 has only /v1/loads
    assert sim.json("/v1/loads")[1]["loads"][0]["dp_rank"] == 0
    assert "config" not in info  # a flag, but no ServerArgs field
    assert info["launch_command"].startswith("--model-path ")
    server_args = one_line(sim.log(), "server_args=ServerArgs(")
    assert "mamba_radix_cache_strategy='extra_buffer'" in server_args
    assert "mamba_scheduler_strategy" not in server_args and "_sglbench" not in server_args


def test_ddtree_budget_only_with_the_ddtree_build(tmp_path: Path) -> None:
    need_catalog("0.5.23")
    args = ["--model-path", model("qwen3.6-27b"), "--speculative-ddtree-budget", "8"]
    code, log = run_to_exit(tmp_path, args, SGLBENCH_SIM_SGLANG_VERSION="0.5.23")
    assert code == 2 and "unrecognized arguments: --speculative-ddtree-budget 8" in log
    ns = sglang_args.parse_launch_args(
        ["--model-path", "m", "--speculative-ddtree-budget", "8"], release="0.5.23+ddtree"
    )
    assert ns.speculative_ddtree_budget == 8 and ns._sglbench_release == "0.5.23+ddtree"


def test_flags_it_does_not_simulate_are_accepted_and_named_once(start_sim) -> None:
    need_catalog("0.5.23")
    catalog = sglang_catalog.load("0.5.23")
    for dest, value in (("reasoning_parser", "qwen3"), ("tool_call_parser", "qwen25")):
        choices = catalog.by_dest[dest].choices
        if choices is not None and value not in choices:
            pytest.skip(f"SGLang 0.5.23 has no {dest} choice {value!r}")
    sim: Sim = start_sim(
        ["--model-path", model("qwen3-8b"), *IGNORED, "--enable-metrics"],
        SGLBENCH_SIM_SGLANG_VERSION="0.5.23",
    )
    line = one_line(sim.log(), "accepted and ignored by the stand-in")
    named = line.split("not simulated): ", 1)[1].split()
    assert named == ["--reasoning-parser", "--tool-call-parser", "--watchdog-timeout"]
    status, info = sim.json("/server_info")
    assert status == 200
    assert (info["reasoning_parser"], info["tool_call_parser"], info["watchdog_timeout"]) == (
        "qwen3",
        "qwen25",
        600,
    )
    assert sglang_logs.classify_failure(sim.log())["cause"] != "bad_args"


def test_default_is_the_newest_catalogued_public_release(start_sim) -> None:
    newest = release.newest_public()
    assert "+" not in newest
    assert newest == [r for r in sglang_catalog.releases() if "+" not in r][-1]
    sim: Sim = start_sim(
        ["--model-path", model("qwen3-8b")], SGLBENCH_SIM_SGLANG_VERSION="", SGLBENCH_SIM_ACCOUNTING=""
    )
    status, info = sim.json("/server_info")
    assert status == 200 and info["version"] == newest
    assert info["sglbench_sim"]["flags_release"] == newest
    assert f"SGLang stand-in (simulated, no GPU) impersonating SGLang {newest}," in sim.log()


# --- settings -------------------------------------------------------------------------------------


def test_settings_resolve_the_release() -> None:
    newest = release.newest_public()
    assert (settings.load_settings({}).sglang_version, settings.load_settings({}).sglang_release) == (
        newest,
        newest,
    )
    ddtree = settings.load_settings({"SGLBENCH_SIM_SGLANG_VERSION": "0.5.23+ddtree"})
    if "0.5.23+ddtree" in sglang_catalog.releases():
        assert (ddtree.sglang_version, ddtree.sglang_release) == ("0.5.23+ddtree", "0.5.23+ddtree")
    # not catalogued: the version is reported as given, the flags come from the nearest catalogued release
    future = settings.load_settings({"SGLBENCH_SIM_SGLANG_VERSION": "9.9.9"})
    assert (future.sglang_version, future.sglang_release) == ("9.9.9", newest)
    local = settings.load_settings({"SGLBENCH_SIM_SGLANG_VERSION": f"{newest}+mybuild"})
    assert local.sglang_release == newest
    assert "nearest catalogued release" in release.resolve("9.9.9").describe()
    with pytest.raises(
        settings.SimSettingsError, match="SGLBENCH_SIM_SGLANG_VERSION='banana' is not an SGLang"
    ):
        settings.load_settings({"SGLBENCH_SIM_SGLANG_VERSION": "banana"})


def test_bad_version_exits_2_naming_the_variable(tmp_path: Path) -> None:
    code, log = run_to_exit(
        tmp_path, ["--model-path", model("qwen3-8b")], SGLBENCH_SIM_SGLANG_VERSION="latest"
    )
    assert code == 2 and "SGLBENCH_SIM_SGLANG_VERSION='latest' is not an SGLang version" in log


def test_ignored_flags_leave_out_what_is_modelled_or_implemented() -> None:
    ns = sglang_args.parse_launch_args(
        [
            "--model-path", "m", "--tp-size", "1", "--port", "1234", "--api-key", "k", "--enable-metrics",
            "--mamba-radix-cache-strategy", "auto", "--enable-lora", *IGNORED,
        ],
        release="0.5.23",
    )  # fmt: skip
    assert server.ignored_flags(ns) == [
        "--enable-lora",  # changes memory in SGLang, but the planner only assumes: not simulated
        "--reasoning-parser",
        "--tool-call-parser",
        "--watchdog-timeout",
    ]
    assert server.release_field(ns, "mamba_scheduler_strategy") == "mamba_radix_cache_strategy"
    assert server.release_field(ns, "cuda_graph_max_bs") == "cuda_graph_max_bs_decode"
    fields = server.release_fields(ns)
    assert "mamba_scheduler_strategy" not in fields and not any(k.startswith("_") for k in fields)


# --- the shim's sglang.srt.server_args ------------------------------------------------------------


def shim_env(tmp_path: Path, version: str) -> dict[str, str]:
    env = sim_env(tmp_path / "state", SGLBENCH_SIM_SGLANG_VERSION=version, SGLBENCH_SIM_ACCOUNTING="")
    env["PYTHONPATH"] = f"{PYTHON_SRC}{os.pathsep}{SHIM}"
    return env


PARSE_CODE = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
ns = parser.parse_args(sys.argv[1:])
mamba = getattr(ns, "mamba_radix_cache_strategy", getattr(ns, "mamba_scheduler_strategy", None))
outside = sorted(m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names
                 and m.split(".")[0] not in ("sglang", "sglbench", "__main__"))
print(json.dumps({"mamba": mamba, "outside": outside}))
"""


def shim_parse(tmp_path: Path, version: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", "-c", PARSE_CODE, "--model-path", "m", *argv],
        env=shim_env(tmp_path, version),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_shim_server_args_parser_is_the_impersonated_release(tmp_path: Path) -> None:
    need_catalog("0.5.23")
    need_catalog(OLD_RELEASE)
    new_ok = shim_parse(tmp_path, "0.5.23", "--mamba-radix-cache-strategy", "extra_buffer")
    assert new_ok.returncode == 0, new_ok.stderr
    assert json.loads(new_ok.stdout) == {
        "mamba": "extra_buffer",
        "outside": [],
    }  # bare interpreter, stdlib only
    new_bad = shim_parse(tmp_path, "0.5.23", "--mamba-scheduler-strategy", "extra_buffer")
    assert new_bad.returncode == 2 and "unrecognized arguments: --mamba-scheduler-strategy" in new_bad.stderr
    old_ok = shim_parse(tmp_path, OLD_RELEASE, "--mamba-scheduler-strategy", "extra_buffer")
    assert old_ok.returncode == 0 and json.loads(old_ok.stdout)["mamba"] == "extra_buffer"
    old_bad = shim_parse(tmp_path, OLD_RELEASE, "--mamba-radix-cache-strategy", "extra_buffer")
    assert (
        old_bad.returncode == 2 and "unrecognized arguments: --mamba-radix-cache-strategy" in old_bad.stderr
    )


def test_shim_prepare_server_args_and_version(tmp_path: Path) -> None:
    code = (
        "import sglang; from sglang.srt.server_args import prepare_server_args; "
        "a = prepare_server_args(['--model-path', 'm', '--tp', '2']); "
        "print(sglang.__version__, a.model_path, a.tp_size, a.url())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=shim_env(tmp_path, "0.5.23"),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0.5.23", "m", "2", "http://127.0.0.1:30000"]
    unset = subprocess.run(
        [sys.executable, "-c", "import sglang; print(sglang.__version__)"],
        env=shim_env(tmp_path, ""),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert unset.stdout.strip() == release.newest_public()


@pytest.mark.parametrize("version", ["0.5.23+ddtree", "0.5.11", "0.4.10"])
def test_shim_flag_dump_reads_back_as_the_release_catalog(tmp_path: Path, version: str) -> None:
    """The preflight's dump of "the installed SGLang" (sglang_parser_dump.DUMP_CODE) on a sim host gives
    the impersonated release's catalog: same flags, spellings, actions, types, choices, deprecations."""
    need_catalog(version)
    out = subprocess.run(
        sglang_parser_dump.dump_argv(sys.executable),
        env=shim_env(tmp_path, version),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = sglang_parser_dump.parse_dump(out.stdout)
    assert doc["release"] == version and doc["method"] == "installed"
    dumped = sglang_catalog.catalog_from_dict(doc)
    shipped = sglang_catalog.load(version)

    def shape(cat: sglang_catalog.Catalog) -> dict[tuple[str, ...], tuple[object, ...]]:
        return {
            f.opts: (f.dest, f.action, f.nargs, f.type, f.choices, f.deprecated, f.custom, f.required)
            for f in cat.flags
        }

    assert shape(dumped) == shape(shipped)
    assert dumped.allow_abbrev == shipped.allow_abbrev
    # defaults: the dump leaves out None and False, like the catalog generator
    for spec in shipped.flags:
        if spec.default not in (None, False):
            assert dumped.by_option[spec.flag].default == spec.default, spec.flag


def test_shim_srt_has_no_accounting_markers() -> None:
    """plan_inputs greps the installed sglang/srt for accounting markers before it falls back to the
    version: the shim's srt must hold none, or the sim host's accounting would come from the shim."""
    assert plan_inputs.find_markers(str(SHIM / "sglang")) == {}
