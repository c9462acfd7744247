"""Host facts for the planner: SGLang probe output, source markers, accounting choice, GPU memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglbench.hostlib import capacity, gpus, plan_inputs

SMI = """0, GPU-a, 97887, 0, 97887
1, GPU-b, 97887, 20480, 77407
2, GPU-c, 97887, 512, [N/A]
"""


def write_tree(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def test_probe_code_prints_version_dir_and_marker() -> None:
    argv = plan_inputs.probe_argv("/opt/sglang/bin/python")
    assert argv[:2] == ["/opt/sglang/bin/python", "-c"]
    assert "sglang.__version__" in argv[2] and "__sglbench_accounting__" in argv[2]


def test_parse_probe_reads_the_last_line() -> None:
    got = plan_inputs.parse_probe(
        "warning: something\n0.5.10.post1 /venv/lib/python3.11/site-packages/sglang -\n"
    )
    assert (got.version, got.path, got.declared_accounting) == (
        "0.5.10.post1",
        "/venv/lib/python3.11/site-packages/sglang",
        None,
    )
    assert plan_inputs.parse_probe("0.0.0+sglbench.sim /usr/lib/sglang B").declared_accounting == "B"
    for bad in ("", "0.5.10"):
        with pytest.raises(plan_inputs.PlanInputError, match="probe"):
            plan_inputs.parse_probe(bad)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"srt/managers/tp_worker.py": 'assert x > 0, "max_running_request is zero"'}, "A"),
        ({"srt/model_executor/mixin.py": 'raise RuntimeError("Hybrid ... state cache is too small")'}, "B"),
        (
            {
                "srt/model_executor/mixin.py": '"state cache is too small"',
                "srt/mem_cache/kv_cache_configurator.py": (
                    "class KVCacheConfigurator:\n  def _handle_max_mamba_cache(self): ..."
                ),
            },
            "C",
        ),
    ],
)
def test_source_markers_pick_the_variant(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    root = write_tree(tmp_path / "sglang", {"__init__.py": "", **files})
    install = plan_inputs.SglangInstall("0.5.99", root)  # the version alone would say C
    install.markers = plan_inputs.find_markers(root)
    assert plan_inputs.resolve_accounting(install).accounting == expected
    assert install.accounting_source == "source"
    assert all(not rel.startswith("/") and rel.startswith("srt") for rel in install.markers.values())


def test_accounting_precedence(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "sglang", {"srt/a.py": "max_running_request is zero"})
    install = plan_inputs.SglangInstall(
        "0.5.20", root, declared_accounting="b", markers=plan_inputs.find_markers(root)
    )
    assert plan_inputs.resolve_accounting(install, "C").accounting_source == "option"
    assert (install.accounting, install.accounting_source) == ("C", "option")
    plan_inputs.resolve_accounting(install)
    assert (install.accounting, install.accounting_source) == ("B", "sglbench_marker")
    install.declared_accounting = None
    plan_inputs.resolve_accounting(install)
    assert (install.accounting, install.accounting_source) == ("A", "source")
    install.markers = {}
    plan_inputs.resolve_accounting(install)
    assert (install.accounting, install.accounting_source) == ("C", "version")
    # the sim stand-in's default version maps to A, like the stand-in itself
    assert (
        plan_inputs.resolve_accounting(plan_inputs.SglangInstall("0.0.0+sglbench.sim", "/x")).accounting
        == "A"
    )


def test_bad_declared_variant_is_a_plan_error() -> None:
    with pytest.raises(capacity.PlanError):
        plan_inputs.resolve_accounting(plan_inputs.SglangInstall("0.5.1", "/x", declared_accounting="Z"))


def test_no_srt_tree_has_no_markers(tmp_path: Path) -> None:
    assert plan_inputs.find_markers(str(tmp_path)) == {}


def test_gpu_memory_takes_the_smallest_over_the_configs_gpus() -> None:
    mem = plan_inputs.gpu_memory(SMI, [0, 1])
    assert (mem.min_total_mib, mem.min_free_mib) == (97887, 77407)
    assert plan_inputs.gpu_memory(SMI, [2]).min_free_mib == 97887 - 512  # [N/A] -> total - used
    assert mem.to_dict()["free_mib"] == [97887, 77407]


def test_gpu_memory_names_missing_gpus() -> None:
    with pytest.raises(plan_inputs.PlanInputError, match=r"GPU\(s\) \[5\] not reported"):
        plan_inputs.gpu_memory(SMI, [0, 5])
    with pytest.raises(plan_inputs.PlanInputError, match="no GPUs"):
        plan_inputs.gpu_memory(SMI, [])


def test_free_memory_at_start_subtracts_the_planners_context_overhead() -> None:
    mem = plan_inputs.gpu_memory(SMI, [0])
    # the mission's RTX PRO 6000: 97887 MiB idle -> 94.24 GiB free when SGLang measures it
    assert plan_inputs.free_gib_at_start(mem, 1) == pytest.approx(94.24, abs=0.005)
    assert plan_inputs.free_gib_at_start(mem, 1) == pytest.approx(gpus.default_free_gib(97887 / 1024, 1))
    assert plan_inputs.free_gib_at_start(mem, 4) == pytest.approx(gpus.default_free_gib(97887 / 1024, 4))
    assert plan_inputs.free_gib_at_start(mem, 1, overhead_gib=0.5) == pytest.approx(97887 / 1024 - 0.5)


def test_sglang_leftovers_are_reclaimable() -> None:
    mem = plan_inputs.gpu_memory(SMI, [0, 1])
    apps = "11, GPU-b, 16384, python3\n12, GPU-b, 4096, other\n13, GPU-c, 512, python3\n"
    cmd = {11: "python3 -m sglang.launch_server --tp-size 2", 12: "/opt/render", 13: "python3 -m sglang.x"}
    plan_inputs.add_reclaimable(mem, apps, lambda pid: cmd[pid], "sglang")
    assert mem.reclaimable_mib == {1: 16384}  # GPU-c is not one of the config's GPUs
    assert mem.available_mib(1) == 77407 + 16384 and mem.min_free_mib == 77407 + 16384
    assert mem.reclaimed_from == ["pid 11 (python3 -m sglang.launch_server --tp-size 2) 16384 MiB on GPU 1"]
    # never more than the GPU's capacity; an empty match reclaims nothing
    plan_inputs.add_reclaimable(mem, "14, GPU-a, 9999, python3\n", lambda pid: "sglang", "sglang")
    assert mem.available_mib(0) == 97887
    untouched = plan_inputs.gpu_memory(SMI, [1])
    assert plan_inputs.add_reclaimable(untouched, apps, lambda pid: cmd[pid], "").reclaimable_mib == {}


def _run_probe(site: Path) -> str:
    import subprocess
    import sys

    argv = plan_inputs.probe_argv(sys.executable)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([*argv], env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def test_the_probe_reads_an_installed_distribution_without_importing_it(tmp_path: Path) -> None:
    """Importing SGLang takes seconds; its metadata names the version of the package Python would import."""
    site = tmp_path / "site"
    write_tree(
        site,
        {
            "sglang/__init__.py": "raise SystemExit('imported')\n",
            "sglang-0.5.23.dist-info/METADATA": "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n",
            "sglang-0.5.23.dist-info/RECORD": "sglang/__init__.py,,\n",
        },
    )
    got = plan_inputs.parse_probe(_run_probe(site))
    assert (got.version, got.path, got.declared_accounting) == ("0.5.23", str(site / "sglang"), None)


def test_the_probe_imports_a_package_without_metadata(tmp_path: Path) -> None:
    """The stand-in (and a source tree on PYTHONPATH) has no metadata: imported, its declaration read."""
    site = tmp_path / "site"
    write_tree(site, {"sglang/__init__.py": "__version__ = '0.5.2'\n__sglbench_accounting__ = 'B'\n"})
    got = plan_inputs.parse_probe(_run_probe(site))
    assert (got.version, got.declared_accounting) == ("0.5.2", "B")
