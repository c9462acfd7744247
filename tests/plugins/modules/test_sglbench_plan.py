"""sglbench_plan module: main() with patched module args, nvidia-smi and SGLang probe; exits caught."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "tests" / "fixtures" / "models"
HF_CACHE = REPO / "tests" / "fixtures" / "hf_cache"  # HF_HOME layout: hub/models--Qwen--Qwen3-8B

# conftest.py aliases ansible.module_utils.sglbench_hostlib to sglbench.hostlib (one copy of every class).
import sglbench_plan  # noqa: E402
from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes  # noqa: E402

MISSION_ARGV = [
    "/usr/bin/python3", "-m", "sglang.launch_server",
    "--model-path", str(MODELS / "qwen3.6-27b"),
    "--tp-size", "1", "--host", "127.0.0.1", "--port", "30002",
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", str(MODELS / "qwen3.6-27b-dflash"),
    "--mem-fraction-static", "0.75",
    "--max-running-requests", "8",
    "--context-length", "32768",
    "--speculative-dflash-block-size", "16",
    "--mamba-scheduler-strategy", "extra_buffer",
]  # fmt: skip
IDLE_SMI = "".join(f"{i}, GPU-{i}, 97887, 0, 97887\n" for i in range(8))


class Exit(Exception):
    def __init__(self, kind: str, result: dict[str, Any]) -> None:
        super().__init__(kind)
        self.kind = kind
        self.result = result


def _capture_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """exit_json / fail_json raise Exit("exit" | "fail", result) instead of ending the process."""

    def exit_json(self: Any, **kwargs: Any) -> None:
        raise Exit("exit", kwargs)

    def fail_json(self: Any, **kwargs: Any) -> None:
        raise Exit("fail", kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


class FakeHost:
    """Stands in for run_command: the SGLang probe and nvidia-smi."""

    def __init__(
        self, probe: str = "0.0.0+sglbench.sim /usr/lib/python3/dist-packages/sglang -", smi: str = IDLE_SMI
    ):
        self.probe = probe
        self.smi = smi
        self.apps = ""
        self.probe_rc = 0
        self.smi_rc = 0
        self.calls: list[tuple[list[str], dict[str, str] | None]] = []

    def __call__(self, module: Any, args: list[str], environ_update: dict[str, str] | None = None, **_: Any):
        self.calls.append((list(args), environ_update))
        if args[1:2] == ["-c"]:
            return (
                self.probe_rc,
                self.probe + "\n",
                "ModuleNotFoundError: No module named 'sglang'" if self.probe_rc else "",
            )
        if args[1].startswith("--query-compute-apps"):
            return 0, self.apps, ""
        return self.smi_rc, self.smi, "NVIDIA-SMI has failed" if self.smi_rc else ""


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FakeHost:
    fake = FakeHost()

    def run_command(self: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return fake(self, args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)

    _capture_exits(monkeypatch)
    return fake


def run_module(monkeypatch: pytest.MonkeyPatch, args: dict[str, Any], check_mode: bool = False) -> Exit:
    payload = {"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check_mode}}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps(payload)))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(Exit) as caught:
        sglbench_plan.main()
    return caught.value


def test_default_policy_skips_the_missions_failing_config(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost
) -> None:
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0]})
    assert out.kind == "exit", out.result
    r = out.result
    assert r["changed"] is False and r["action"] == "skip" and r["policy"] == "skip"
    assert r["plan"]["failure"]["kind"] == "zero_requests"
    assert r["plan"]["mamba_slots"] == 4 and r["plan"]["max_running_requests"] == 0
    assert r["plan"]["recommendations"] and "recommendations:" in r["reason"]
    assert r["argv"] == MISSION_ARGV and r["tuned"] is False and r["autotune"] is None
    # inputs from the host: the probe with the unit's python, nvidia-smi of GPU 0 minus the context overhead
    assert (
        r["inputs"]["sglang"]["accounting"] == "A" and r["inputs"]["sglang"]["accounting_source"] == "version"
    )
    assert r["inputs"]["gpu_mem_gib"] == pytest.approx(95.5928, abs=1e-3)
    assert r["inputs"]["free_gib"] == pytest.approx(94.2428, abs=1e-3)
    assert host.calls[0][0][:2] == ["/usr/bin/python3", "-c"]
    assert host.calls[1][0][1] == "--query-gpu=index,uuid,memory.total,memory.used,memory.free"
    assert host.calls[2][0][1].startswith("--query-compute-apps=")


def test_autotune_returns_the_tuned_command_line(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    out = run_module(
        monkeypatch,
        {
            "argv": MISSION_ARGV,
            "gpus": [0],
            "policy": "autotune",
            "autotune_bounds": {"max_running_requests": {"min": 8}},
        },
    )
    r = out.result
    assert r["action"] == "start" and r["tuned"] is True
    assert r["plan"]["fits"] and r["plan"]["max_running_requests"] >= 8
    assert r["autotune"]["applied"] and r["autotune"]["original"]["failure"]["kind"] == "zero_requests"
    changed = r["autotune"]["flags"]
    assert changed and all(f in r["argv"] for f in changed)
    assert r["argv"][:3] == MISSION_ARGV[:3] and r["argv"] != MISSION_ARGV
    assert r["reason"].startswith("autotuned:")


def test_autotune_with_nothing_allowed_skips(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    out = run_module(
        monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "policy": "autotune", "autotune_flags": []}
    )
    r = out.result
    assert r["action"] == "skip" and r["tuned"] is False
    assert r["autotune"]["applied"] is False and r["autotune"]["rejected"]
    assert "autotune found no recommendation" in r["reason"]


def test_force_starts_and_records_the_prediction(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    r = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "policy": "force"}).result
    assert r["action"] == "start" and r["argv"] == MISSION_ARGV and r["plan"]["fits"] is False
    assert r["reason"].startswith("forced despite predicted zero_requests")


def test_a_working_config_starts_and_check_mode_gives_the_same(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost
) -> None:
    argv = [w if w != "8" else "4" for w in MISSION_ARGV]
    normal = run_module(monkeypatch, {"argv": argv, "gpus": [0]}).result
    checked = run_module(monkeypatch, {"argv": argv, "gpus": [0]}, check_mode=True).result
    assert normal["action"] == "start" and normal["reason"] is None and normal["plan"]["fits"]
    assert checked["plan"] == normal["plan"] and checked["changed"] is False


def test_sim_marker_and_unit_environment_pick_the_variant(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost
) -> None:
    host.probe = "0.0.0+sglbench.sim /usr/lib/python3/dist-packages/sglang B"
    r = run_module(
        monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "environment": {"SGLBENCH_SIM_ACCOUNTING": "B"}}
    ).result
    assert r["inputs"]["sglang"]["accounting"] == "B" and r["plan"]["accounting"] == "B"
    assert r["inputs"]["sglang"]["accounting_source"] == "sglbench_marker"
    assert host.calls[0][1] == {"SGLBENCH_SIM_ACCOUNTING": "B"}


def test_busy_gpu_lowers_the_free_memory(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    host.smi = "0, GPU-0, 97887, 0, 97887\n1, GPU-1, 97887, 10240, 87647\n"
    argv = [*MISSION_ARGV]
    argv[argv.index("--tp-size") + 1] = "2"
    r = run_module(monkeypatch, {"argv": argv, "gpus": [0, 1], "accounting": "A"}).result
    assert r["inputs"]["free_mib"] == [97887, 87647]
    assert r["inputs"]["free_gib"] == pytest.approx(87647 / 1024 - 1.85, abs=1e-3)
    assert r["inputs"]["sglang"]["accounting_source"] == "option"


def test_memory_of_sglang_leftovers_counts_as_free(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    # GPU 1 holds 10 GiB: 8 GiB by a leftover SGLang worker (the stop phase kills it), 2 GiB by something else
    host.smi = "0, GPU-0, 97887, 0, 97887\n1, GPU-1, 97887, 10240, 87647\n"
    host.apps = "101, GPU-1, 8192, python3\n202, GPU-1, 2048, Xorg\n303, GPU-7, 4096, python3\n"
    cmdlines = {101: "/usr/bin/python3 -m sglang.launch_server --port 30001", 202: "/usr/lib/xorg/Xorg"}
    monkeypatch.setattr(sglbench_plan, "read_cmdline", lambda pid: cmdlines.get(pid, ""))
    argv = [*MISSION_ARGV]
    argv[argv.index("--tp-size") + 1] = "2"
    r = run_module(monkeypatch, {"argv": argv, "gpus": [0, 1], "accounting": "A"}).result
    assert r["inputs"]["reclaimable_mib"] == [0, 8192]
    assert r["inputs"]["free_gib"] == pytest.approx((87647 + 8192) / 1024 - 1.85, abs=1e-3)
    assert r["inputs"]["reclaimed_from"] == [
        "pid 101 (/usr/bin/python3 -m sglang.launch_server --port 30001) 8192 MiB on GPU 1"
    ]
    off = run_module(
        monkeypatch, {"argv": argv, "gpus": [0, 1], "accounting": "A", "reclaim_match": ""}
    ).result
    assert off["inputs"]["free_gib"] == pytest.approx(87647 / 1024 - 1.85, abs=1e-3)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"gpus": [0, 1]}, "gpus: 2 GPU(s) [0, 1] given for --tp-size 1"),
        ({"argv": ["/usr/bin/python3", "-m", "sglang.launch_server"]}, "no launch_server flags"),
        ({"argv": [*MISSION_ARGV, "--no-such-flag"]}, "--no-such-flag"),
        ({"argv": ["python3", "--model-path", "/nonexistent/model"]}, "no config.json at /nonexistent/model"),
        ({"gpus": [9]}, "GPU(s) [9] not reported by nvidia-smi"),
        (
            {"policy": "autotune", "autotune_bounds": {"max_running_requests": 4}},
            "autotune_bounds.max_running_requests",
        ),
    ],
)
def test_bad_input_fails_with_context(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost, change: dict[str, Any], fragment: str
) -> None:
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], **change})
    assert out.kind == "fail", out.result
    assert fragment in out.result["msg"] and out.result["msg"].startswith("cannot plan this config")


def test_the_release_catalog_is_read_from_the_hosts_cached_file(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost, tmp_path: Path
) -> None:
    doc = {
        "schema": "sglbench.sglang_catalog/1",
        "release": "9.9.9",
        "flags": [{"opts": ["--model-path"], "dest": "model_path", "action": "store"}],
    }
    cached = tmp_path / "9.9.9-abc.json"
    cached.write_text(json.dumps(doc))
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "sglang_flags_file": str(cached)})
    # the mission's command line has flags this one-flag release does not know: it is checked against it
    assert out.kind == "fail" and "9.9.9" in out.result["msg"], out.result
    cached.write_text("{not json")
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "sglang_flags_file": str(cached)})
    assert out.kind == "fail" and str(cached) in out.result["msg"]
    assert "run the play again from its preflight" in out.result["msg"]
    both = {"argv": MISSION_ARGV, "gpus": [0], "sglang_flags_file": str(cached), "sglang_flags": doc}
    assert "mutually exclusive" in run_module(monkeypatch, both).result["msg"]


def test_missing_sglang_and_nvidia_smi_say_what_to_change(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost
) -> None:
    host.probe_rc = 1
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0]})
    assert out.kind == "fail" and "cannot import sglang with /usr/bin/python3" in out.result["msg"]
    assert "sglbench_sglang_python" in out.result["msg"]
    host.probe_rc, host.smi_rc = 0, 9
    out = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0]})
    assert (
        out.kind == "fail"
        and "exited 9" in out.result["msg"]
        and "gpu_mem_gib and free_gib" in out.result["msg"]
    )
    # explicit memory figures plan without nvidia-smi
    out = run_module(
        monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "gpu_mem_gib": 95.59, "free_gib": 94.24}
    )
    assert out.kind == "exit" and out.result["plan"]["pre_gib"] == 94.24


def test_force_without_a_plan_still_starts(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> None:
    host.probe_rc = 1
    r = run_module(monkeypatch, {"argv": MISSION_ARGV, "gpus": [0], "policy": "force"}).result
    assert r["action"] == "start" and r["plan"] is None and "cannot import sglang" in r["error"]


def test_a_hub_id_is_read_from_the_cache_the_unit_environment_names(
    monkeypatch: pytest.MonkeyPatch, host: FakeHost, tmp_path: Path
) -> None:
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # the module's own default cache is empty
    argv = [
        "/usr/bin/python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-8B",
        "--tp-size",
        "1",
    ]
    out = run_module(monkeypatch, {"argv": argv, "gpus": [0]})
    assert out.kind == "fail"
    assert "--model-path: Qwen/Qwen3-8B (revision main) is not in the Hugging Face cache" in out.result["msg"]
    assert f"looked in {tmp_path}/.cache/huggingface/hub" in out.result["msg"]
    assert out.result["models"]["model"] == {
        "path": "Qwen/Qwen3-8B",
        "local": False,
        "files": {},
        "weights": None,
    }

    environment = {"HF_HOME": str(HF_CACHE)}
    r = run_module(monkeypatch, {"argv": argv, "gpus": [0], "environment": environment}).result
    commit = (HF_CACHE / "hub" / "models--Qwen--Qwen3-8B" / "refs" / "main").read_text()
    assert r["action"] == "start" and r["argv"] == argv  # the unit keeps the hub id
    assert r["plan"]["notes"][0].startswith(f"--model-path Qwen/Qwen3-8B (revision main = commit {commit})")
    assert f"{HF_CACHE / 'hub'} (from HF_HOME)" in r["plan"]["notes"][0]
    model = r["models"]["model"]
    assert model["hub"] == {"id": "Qwen/Qwen3-8B", "revision": "main", "commit_hash": commit}
    assert model["path"] == "Qwen/Qwen3-8B" and "config.json" in model["files"]
    assert host.calls[-3][1] == environment  # the SGLang probe ran with the same environment


# --- against the real stand-in: real SGLang probe (the sim shim), real nvidia-smi stand-in, real start ---

sys.path.insert(0, str(REPO / "tests" / "python" / "sim"))
import sim_harness  # noqa: E402

from sglbench.sim import release  # noqa: E402

SHIM = REPO / "python" / "sglbench" / "sim" / "sglang_shim"


@pytest.fixture
def sim_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """This process as a sim host: the shim is `sglang`, nvidia-smi is the stand-in's, one state dir."""
    state = tmp_path / "state"
    # The stand-in impersonates 0.5.11: its own accounting is A (< 0.5.12, so the probe maps the version)
    # and it spells the mission's flags as MISSION_ARGV does (--mamba-scheduler-strategy).
    env = sim_harness.sim_env(state, SGLBENCH_SIM_SGLANG_VERSION="0.5.11", SGLBENCH_SIM_ACCOUNTING="")
    env["PYTHONPATH"] = f"{SHIM}{os.pathsep}{env['PYTHONPATH']}"
    for key in ("PYTHONPATH", "SGLBENCH_SIM_STATE_DIR", "SGLBENCH_SIM_TIME_SCALE", release.ENV):
        monkeypatch.setenv(key, env[key])

    _capture_exits(monkeypatch)
    return env


def sim_plan(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], gpus: list[int], **opts: Any
) -> dict[str, Any]:
    args = {
        "argv": [sys.executable, "-m", "sglang.launch_server", *flags],
        "gpus": gpus,
        "nvidia_smi": str(sim_harness.NVIDIA_SMI),
        **opts,
    }
    out = run_module(monkeypatch, args)
    assert out.kind == "exit", out.result
    return out.result


@pytest.mark.parametrize("variant", ["", "B"])
def test_plan_on_a_sim_host_equals_what_the_stand_in_allocates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sim_host: dict[str, str], variant: str
) -> None:
    flags = [w if w != "8" else "4" for w in MISSION_ARGV[3:]]  # the seed's working service
    del flags[flags.index("--port") : flags.index("--port") + 2]  # the harness picks a free port
    unit_env = {"SGLBENCH_SIM_ACCOUNTING": variant} if variant else {}
    r = sim_plan(monkeypatch, flags, [0], environment=unit_env)
    assert r["action"] == "start" and r["plan"]["fits"]
    assert r["inputs"]["sglang"]["accounting"] == (variant or "A")
    assert r["inputs"]["sglang"]["accounting_source"] == ("sglbench_marker" if variant else "version")
    sim = sim_harness.launch(
        tmp_path / "run", flags, env={**sim_host, **unit_env, "CUDA_VISIBLE_DEVICES": "0"}
    )
    try:
        status, info = sim.json("/server_info")
    finally:
        sim.stop()
    assert status == 200
    state = info["internal_states"][0]  # type: ignore[index]
    assert info["max_total_num_tokens"] == r["plan"]["max_total_num_tokens"]  # type: ignore[index]
    assert state["effective_max_running_requests_per_dp"] == r["plan"]["max_running_requests"]


def test_memory_of_a_running_stand_in_is_reclaimable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sim_host: dict[str, str]
) -> None:
    # a leftover server on GPU 0, started like a unit (python -m sglang.launch_server)
    leftover = sim_harness.launch(
        tmp_path / "left",
        ["--model-path", str(MODELS / "qwen3-8b")],
        env={**sim_host, "CUDA_VISIBLE_DEVICES": "0"},
        module="sglang.launch_server",
    )
    try:
        flags = ["--model-path", str(MODELS / "qwen3-8b")]
        counted = sim_plan(monkeypatch, flags, [0])
        ignored = sim_plan(monkeypatch, flags, [0], reclaim_match="")
    finally:
        leftover.stop()
    held = counted["inputs"]["reclaimable_mib"][0]
    assert held > 0 and counted["inputs"]["used_mib"][0] == held
    assert counted["inputs"]["free_gib"] == pytest.approx(97887 / 1024 - 1.35, abs=1e-3)
    assert ignored["inputs"]["free_gib"] == pytest.approx((97887 - held) / 1024 - 1.35, abs=1e-3)
    assert "sglang.launch_server" in counted["inputs"]["reclaimed_from"][0]
