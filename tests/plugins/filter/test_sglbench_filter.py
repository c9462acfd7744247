"""plugins/filter/sglbench.py: matrix validation, TP phases, launch argv, systemd quoting, instances."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from sglbench.hostlib import result_schema

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("sglbench_filter", REPO / "plugins" / "filter" / "sglbench.py")
assert _spec and _spec.loader
flt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flt)


def cfg(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "ar", "model_path": "/models/m", "tp": [1]}
    base.update(over)
    return base


def test_shipped_matrices_are_valid() -> None:
    for inv in ("sim", "ct200"):
        data = yaml.safe_load(
            (REPO / "inventory" / inv / "group_vars" / "sglang_gpu" / "matrix.yml").read_text()
        )
        assert flt.matrix_errors(data["sglbench_matrix"], 8) == [], inv


def test_sim_matrix_has_the_missions_failing_case() -> None:
    data = yaml.safe_load((REPO / "inventory/sim/group_vars/sglang_gpu/matrix.yml").read_text())
    cases = [
        c
        for c in data["sglbench_matrix"]
        if c.get("algorithm") == "DFLASH"
        and c["tp"] == [1]
        and c["args"].get("mem_fraction_static") == 0.75
        and c["args"].get("max_running_requests") == 8
        and c["args"].get("context_length") == 32768
        and "qwen3.6-27b" in c["model_path"]
    ]
    assert len(cases) == 1


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        ([cfg(), cfg()], "config 'ar': field 'name': duplicate"),
        (
            [cfg(port=31000), cfg(name="b", port=31000)],
            "config 'b': field 'port': 31000 is also used by config 'ar'",
        ),
        ([cfg(), cfg(name="b", port=30000)], "config 'b': field 'port': 30000 is also used by config 'ar'"),
        ([cfg(tp=[3])], "config 'ar': field 'tp': 3 does not divide the host's 8 GPUs"),
        ([cfg(tp=[16])], "config 'ar': field 'tp': 16 does not divide"),
        ([cfg(tp=[])], "config 'ar': field 'tp': required"),
        ([cfg(tp=[1, 1])], "lists a TP size twice"),
        ([cfg(algorithm="DFLASH")], "config 'ar': field 'draft_model_path': required for algorithm DFLASH"),
        (
            [cfg(algorithm="none", draft_model_path="/d")],
            "field 'draft_model_path': given but algorithm none",
        ),
        ([cfg(algorithm="MEDUSA")], "config 'ar': field 'algorithm': 'MEDUSA' is not one of"),
        (
            [cfg(args={"mem_fraction_static": 1.5})],
            "field 'args.mem_fraction_static': 1.5 is out of range (0.0, 1.0)",
        ),
        ([cfg(args={"max_running_requests": 0})], "field 'args.max_running_requests': 0 is out of range"),
        ([cfg(args={"tp_size": 2})], "field 'args.tp_size': set through tp instead of args"),
        ([cfg(args={"api_key": "x"})], "field 'args.api_key': set through sglang_units_api_key"),
        ([cfg(args={"Mem-Fraction": 1})], "field 'args.Mem-Fraction': SGLang arg names are snake_case"),
        ([cfg(env={"HF_TOKEN": "x"})], "field 'env.HF_TOKEN': looks like a secret"),
        ([cfg(env={"1BAD": "x"})], "field 'env.1BAD': not a valid environment variable name"),
        ([cfg(colour="red")], "config 'ar': field 'colour': unknown field"),
        ([cfg(name="Bad Name")], "field 'name': 'Bad Name' must match"),
        ([cfg(port=80)], "field 'port': 80 must be an integer in 1024..65535"),
        ([{"tp": [1]}], "sglbench_matrix[0]: field 'name'"),
        ([], "must be a non-empty list"),
    ],
)
def test_each_rule_names_the_config_and_field(matrix: list[dict[str, Any]], expected: str) -> None:
    errors = flt.matrix_errors(matrix, 8)
    assert any(expected in e for e in errors), errors


def test_all_errors_are_reported_at_once() -> None:
    errors = flt.matrix_errors([cfg(tp=[3]), cfg(algorithm="DDTREE")], 8)
    assert len(errors) >= 3  # tp, duplicate name, draft path


def test_gpu_count_must_be_positive() -> None:
    assert any("sglbench_gpu_count" in e for e in flt.matrix_errors([cfg()], 0))


def test_tp_phases_all_runs_in_order_and_skips_disabled() -> None:
    matrix = [cfg(tp=[8, 1]), cfg(name="b", tp=[4]), cfg(name="c", tp=[2], enabled=False)]
    assert flt.tp_phases(matrix, "all", [1, 4, 8]) == [1, 4, 8]
    assert flt.tp_phases(matrix, "4", [1, 4, 8]) == [4]
    assert flt.tp_errors(matrix, "2") == [
        "tp: 2 is not a TP size of any enabled config in sglbench_matrix (present: [1, 4, 8])"
    ]
    assert flt.tp_errors(matrix, "four")[0].startswith("tp: 'four' must be a TP size")
    assert flt.tp_errors(matrix, 8) == []


def test_launch_argv_is_the_real_command_line() -> None:
    c = cfg(
        algorithm="DFLASH",
        draft_model_path="/models/d",
        args={
            "mem_fraction_static": 0.75,
            "disable_radix_cache": True,
            "enable_metrics": False,
            "page_size": None,
        },
        extra_args=["--cuda-graph-bs", "1", "2"],
    )
    argv = flt.launch_argv(c, 4, {"python": "/venv/bin/python", "host": "127.0.0.1", "port": 30001})
    assert argv == [
        "/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "4",
        "--host", "127.0.0.1", "--port", "30001", "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", "/models/d", "--mem-fraction-static", "0.75",
        "--disable-radix-cache", "--cuda-graph-bs", "1", "2",
    ]  # fmt: skip


def _systemd_split(line: str) -> list[str]:
    """Decode the subset of ExecStart= syntax systemd_exec produces (quotes, backslashes, $$, %%)."""
    words = shlex.split(line, posix=True)
    return [w.replace("$$", "$").replace("%%", "%") for w in words]


@pytest.mark.parametrize(
    "word", ["plain", "with space", "50%", "$HOME", "${X}", 'a"b', "back\\slash", "", "--x=a b", "it's"]
)
def test_systemd_quote_round_trips(word: str) -> None:
    line = flt.systemd_exec(["/usr/bin/python3", word])
    assert _systemd_split(line) == ["/usr/bin/python3", word]


def test_systemd_quote_neutralises_expansion_and_specifiers() -> None:
    assert flt.systemd_quote("$HOME") == '"$$HOME"'
    assert flt.systemd_quote("50%") == '"50%%"'
    assert flt.systemd_quote("/models/qwen3.6-27b") == "/models/qwen3.6-27b"


def test_api_key_never_in_the_exec_line_the_launcher_takes_it_from_the_environment() -> None:
    line = flt.systemd_exec(["/usr/bin/python3", "-m", "sglang.launch_server"], "SGLBENCH_API_KEY")
    assert line == (
        "/usr/bin/python3 /usr/local/libexec/sglbench-launch --key-env SGLBENCH_API_KEY -- "
        "/usr/bin/python3 -m sglang.launch_server"
    )
    assert "--api-key" not in line and "${" not in line
    assert flt.systemd_exec(["/p", "-m", "m"]) == "/p -m m"  # no key: no launcher


@pytest.mark.parametrize(
    ("matrix", "expected"),
    [
        # extra_args cannot set what sglbench sets (abbreviations too: SGLang's argparse accepts prefixes)
        ([cfg(extra_args=["--port", "1"])], "field 'extra_args': --port is set through port"),
        (
            [cfg(extra_args=["--po", "1"])],
            "field 'extra_args': --po is set through port (--po abbreviates --port)",
        ),
        ([cfg(extra_args=["--port=31000"])], "field 'extra_args': --port is set through port"),
        ([cfg(extra_args=["--tp-size", "2"])], "field 'extra_args': --tp-size is set through tp"),
        ([cfg(extra_args=["--tp", "2"])], "--tp is set through tp (--tp abbreviates --tp-size)"),
        ([cfg(extra_args=["--model-path", "/x"])], "--model-path is set through model_path"),
        ([cfg(extra_args=["--api-key", "K"])], "--api-key is set through sglang_units_api_key"),
        ([cfg(extra_args=["--api-k", "K"])], "--api-k is set through sglang_units_api_key"),
        ([cfg(extra_args=["--config", "/x.yaml"])], "--config is set through the matrix"),
        ([cfg(extra_args=["--hf-token", "x"])], "field 'extra_args': --hf-token looks like a secret option"),
        ([cfg(extra_args=["--x", "hf_abcdefghijklmnopqrstuvwxyz"])], "a value looks like a credential"),
        (
            [cfg(args={"po": 30001})],
            "field 'args.po': selects SGLang's --port (abbreviated), set through port",
        ),
        ([cfg(args={"some_token": "x"})], "field 'args.some_token': looks like a secret"),
        # the server must stay on the GPUs its record names
        ([cfg(env={"CUDA_VISIBLE_DEVICES": "3"})], "field 'env.CUDA_VISIBLE_DEVICES': set by sglbench from"),
        # secrets beyond a fixed name list: by word, and by value
        ([cfg(env={"MY_PASSWD": "x"})], "field 'env.MY_PASSWD': looks like a secret"),
        ([cfg(env={"OPENAI_KEY": "x"})], "field 'env.OPENAI_KEY': looks like a secret"),
        ([cfg(env={"OPAQUE": "sk-abcdefghijklmnopqrstu"})], "field 'env.OPAQUE': looks like a secret"),
        # TP sizes: a scalar, a spelled-twice size
        ([cfg(tp=1)], "field 'tp': 1 must be a list of TP sizes, e.g. [1]"),
        ([cfg(tp=[1, "01"])], "field 'tp': [1, '01'] lists a TP size twice"),
        (
            [cfg(draft_model_path=["/d"], algorithm="DFLASH")],
            "field 'draft_model_path': ['/d'] must be a path",
        ),
    ],
)
def test_matrix_validation_gaps_are_closed(matrix: list[dict[str, Any]], expected: str) -> None:
    errors = flt.matrix_errors(matrix, 8)
    assert any(expected in e for e in errors), errors


def test_implicit_ports_are_range_checked() -> None:
    errors = flt.matrix_errors([cfg(), cfg(name="b")], 8, 65535)
    assert errors == [
        "config 'b': field 'port': not set, so sglbench_port_base 65535 + position 1 = 65536, outside "
        "1024..65535; set port, or change sglbench_port_base"
    ]
    assert "sglbench_port_base 22 + position 0 = 22" in flt.matrix_errors([cfg()], 8, 22)[0]
    assert flt.matrix_errors([cfg(port=31000), cfg(name="b")], 8, 65535)[0].startswith("config 'b'")


def test_scalar_tp_gives_messages_not_a_jinja_error() -> None:
    assert flt.tp_phases([cfg(tp=1)], "all") == []
    assert flt.tp_errors([cfg(tp="x"), "junk"], "1")  # no exception


def test_host_level_values_are_checked() -> None:
    assert flt.host_errors("/opt/sglang/.venv/bin/python", {"SGLANG_LOG_MS": "1"}) == []
    errors = flt.host_errors("-/usr/bin/python3", {"CUDA_VISIBLE_DEVICES": "1", "HF_TOKEN": "x"})
    assert errors[0].startswith("sglbench_sglang_python: '-/usr/bin/python3' must be an absolute path")
    assert any(
        e.startswith("sglbench_unit_environment.CUDA_VISIBLE_DEVICES: set by sglbench") for e in errors
    )
    assert any(e.startswith("sglbench_unit_environment.HF_TOKEN: looks like a secret") for e in errors)
    assert flt.host_errors("python3")  # not absolute


def test_configs_must_exist_in_the_matrix() -> None:
    matrix = [cfg(tp=[1, 4]), cfg(name="off", enabled=False)]
    assert flt.configs_errors([], matrix) == []
    assert flt.configs_errors(["ar"], matrix, "4") == []
    assert flt.configs_errors(["nosuch"], matrix) == [
        "configs: 'nosuch' is not a config of sglbench_matrix (configs: ar, off)"
    ]
    assert "is disabled" in flt.configs_errors(["off"], matrix)[0]
    assert flt.configs_errors(["ar"], matrix, "8") == ["configs: 'ar' has no TP 8 (its TP sizes: [1, 4])"]


def test_failure_summary_names_each_failed_attempt() -> None:
    outcomes = [
        {"instance": "a-tp1", "outcome": "ok", "phase": None, "cause": None},
        {"instance": "b-tp1", "outcome": "failed", "phase": "health", "cause": "cuda_oom"},
        {"instance": "c-tp1", "outcome": "skipped", "phase": "plan", "cause": "planned_failure"},
    ]
    assert flt.failure_summary(outcomes, "gpu1", "/r/run/gpu1") == (
        "1 of 3 config attempts failed on gpu1: b-tp1 (health: cuda_oom) (every other config ran and every "
        "GPU was freed; records in /r/run/gpu1)"
    )


def test_environment_lines() -> None:
    assert flt.systemd_env("A", 'x y%"z') == '"A=x y%%\\"z"'
    assert flt.env_file_line("K", 'a$b"c') == 'K="a\\$b\\"c"'


def test_instances_expand_configs_by_tp() -> None:
    matrix = [cfg(tp=[1, 4]), cfg(name="off", tp=[1], enabled=False), cfg(name="b", port=31000, env={"A": 1})]
    inst = flt.instances(matrix, {"python": "/p", "port_base": 30000, "gpu_ids": list(range(8))})
    assert [i["name"] for i in inst] == ["ar-tp1", "ar-tp4", "b-tp1"]
    assert [i["unit"] for i in inst] == [
        "sglang-ar-tp1.service",
        "sglang-ar-tp4.service",
        "sglang-b-tp1.service",
    ]
    assert inst[1]["cuda_visible_devices"] == "0,1,2,3"
    assert inst[1]["gpus"] == [0, 1, 2, 3]
    assert [i["port"] for i in inst] == [30000, 30000, 31000]
    assert inst[2]["env"] == {"A": "1"}
    assert inst[1]["argv"][inst[1]["argv"].index("--tp-size") + 1] == "4"


def test_a_speculative_instance_is_compared_with_the_first_baseline_of_its_model_and_tp() -> None:
    spec = {"algorithm": "DFLASH", "draft_model_path": "/models/d"}
    matrix = [
        cfg(name="zz-ar", tp=[1, 4]),
        cfg(name="ar", tp=[1, 4]),
        cfg(name="other-model", model_path="/models/n"),
        cfg(name="df", tp=[1, 4], **spec),
    ]
    inst = flt.instances(matrix, {"python": "/p", "gpu_ids": list(range(8))})
    by = {i["name"]: i for i in inst}
    assert flt.baseline_instance(inst, by["df-tp1"]) == "ar-tp1"
    assert flt.baseline_instance(inst, by["df-tp4"]) == "ar-tp4"
    assert flt.baseline_instance(inst, by["df-tp1"], ["zz-ar", "df"]) == "zz-ar-tp1"  # only the selected
    assert flt.baseline_instance(inst, by["df-tp1"], ["df"]) is None  # the run has no baseline
    assert flt.baseline_instance(inst, by["ar-tp1"]) is None  # a baseline has none


def test_instances_take_gpus_in_the_given_order() -> None:
    inst = flt.instances([cfg(tp=[2])], {"python": "/p", "gpu_ids": [6, 7, 0, 1]})
    assert inst[0]["cuda_visible_devices"] == "6,7"


def test_telemetry_option_per_instance() -> None:
    plain, metrics = flt.instances(
        [cfg(tp=[2]), cfg(name="m", args={"enable_metrics": True})],
        {"python": "/p", "gpu_ids": [6, 7, 0, 1]},
    )
    defaults = yaml.safe_load((REPO / "roles" / "sglang_cycle" / "defaults" / "main.yml").read_text())
    settings = defaults["sglang_cycle_bench_defaults"]["telemetry"]
    got = flt.telemetry(settings, plain, "0.5.23")
    assert got == {
        "enabled": True,
        "gpus": [6, 7],
        "gpu_interval_ms": 200,
        "server_interval_ms": 1000,
        "metrics": False,  # auto: the launch line has no --enable-metrics
        "load_endpoint": "/v1/loads",
        "nvidia_smi": "nvidia-smi",
    }
    assert "--enable-metrics" in metrics["argv"] and flt.telemetry(settings, metrics, "0.5.23")["metrics"]
    assert flt.telemetry({**settings, "metrics": "on"}, plain, None)["metrics"] is True
    assert flt.telemetry(settings, plain, "0.5.9")["load_endpoint"] == "/get_load"
    assert flt.telemetry({"load_endpoint": False}, plain, "0.5.23")["load_endpoint"] is None
    assert flt.telemetry({"enabled": False}, plain)["enabled"] is False


def test_the_playbook_may_add_enable_metrics_and_says_so() -> None:
    matrix = [
        cfg(),
        cfg(name="own", args={"enable_metrics": True}),
        cfg(name="x", extra_args=["--enable-metrics"]),
    ]
    settings = {"python": "/p", "gpu_ids": [0]}
    plain = flt.instances(matrix, settings)
    assert all(i["added_flags"] == [] for i in plain)
    assert [i["argv"].count("--enable-metrics") for i in plain] == [0, 1, 1]
    added = flt.instances(matrix, {**settings, "enable_metrics": True})
    assert [i["added_flags"] for i in added] == [["--enable-metrics"], [], []]
    assert [i["argv"].count("--enable-metrics") for i in added] == [1, 1, 1]  # never twice
    assert flt.telemetry({}, added[0], "0.5.23")["metrics"] is True
    facts = result_schema.RecordFacts(run_id="r", host="h", instance=added[0], outcome="ok")
    assert facts.to_dict(ended_at=1.0)["config"]["added_flags"] == ["--enable-metrics"]
    facts = result_schema.RecordFacts(run_id="r", host="h", instance=plain[0], outcome="ok")
    assert "added_flags" not in facts.to_dict(ended_at=1.0)["config"]
