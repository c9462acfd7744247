"""One campaign on two sim hosts at once (``inventory/simpair``), one of them killed mid-point.

Two sim host containers of this test's own, in a copy of ``inventory/simpair`` that differs only in the
container names (its group_vars are the real ones, by symlink). ``sglbench run`` takes one lock per host
and runs both in parallel; when host b reaches the benchmark phase of its first config, its container is
killed like a power loss (``podman kill``: UNREACHABLE). Host a must go on and record both configs; the
run exits 2 naming b, stays resumable, and ``sglbench summarize`` lists both hosts, marks b as dropped out
and shows its cut attempt as not valid.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import simhost_util as sh
import yaml

from sglbench import lock

NAMES = {host: f"sglbench-simhost-pair-{os.getpid()}-{host[-1]}" for host in ("simhost-a", "simhost-b")}
MATRIX = [
    {"name": "qwen3-8b-ar", "model_path": "/models/qwen3-8b", "tp": [1], "args": {"context_length": 8192}},
    {
        "name": "qwen3-8b-dflash",
        "model_path": "/models/qwen3-8b",
        "algorithm": "DFLASH",
        "draft_model_path": "/models/qwen3-8b-dflash-b16",
        "tp": [1],
        "args": {"max_running_requests": 16, "context_length": 8192},
    },
]
# One point per config, long enough for the kill to land while it is measured.
LOAD = sh.LOAD | {"repeats": 1, "duration_s": 4}
CUT = "qwen3-8b-ar-tp1"


@pytest.fixture(scope="module")
def pair() -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        for name in NAMES.values():
            stack.enter_context(contextlib.contextmanager(sh.sim_host)(name))
        yield NAMES


def inventory(tmp: Path) -> Path:
    """inventory/simpair with this test's container names; the same group_vars (a symlink to them)."""
    inv = tmp / "simpair"
    inv.mkdir()
    data = yaml.safe_load((sh.REPO / "inventory" / "simpair" / "hosts.yml").read_text())
    hosts = data["all"]["children"]["sglang_gpu"]["hosts"]
    assert sorted(hosts) == sorted(NAMES)
    for host, name in NAMES.items():
        hosts[host]["ansible_host"] = name
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))
    (inv / "group_vars").symlink_to(sh.REPO / "inventory" / "simpair" / "group_vars")
    return inv


@pytest.mark.simhost
def test_one_host_killed_mid_point_the_other_completes(pair: dict[str, str], tmp_path: Path) -> None:
    results, locks, log = tmp_path / "results", tmp_path / "locks", tmp_path / "run.log"
    argv = [
        sys.executable, "-m", "sglbench", "run", "--inventory", str(inventory(tmp_path)), "--tp", "1",
        "--results", str(results), "--lock-dir", str(locks),
        "-e", "sglbench_matrix=" + json.dumps(MATRIX), "-e", "sglbench_bench=" + json.dumps(LOAD),
    ]  # fmt: skip
    lock_files = [locks / lock.lock_name(name) for name in NAMES.values()]
    proc = sh.start(argv, pair["simhost-a"], log)
    try:
        # the bound only sizes a failure (a 2-core machine under heavy load took 6 min to deploy)
        in_bench = f"simhost-b: [1/2] TP1 {CUT} benchmark"
        sh.wait_for(lambda: in_bench in log.read_text(), 1500, "b's point", log)
        held = [not lock.probe_free(f) for f in lock_files]
        killed = subprocess.run(["podman", "kill", pair["simhost-b"]], env=sh.env(pair["simhost-b"]))
        assert killed.returncode == 0
        code = proc.wait(1500)  # bounds a failure only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = log.read_text()
    assert held == [True, True], text[-3000:]  # one lock per host while the campaign runs
    assert all(lock.probe_free(f) for f in lock_files)
    # the run could not complete on b (exit 2, naming it) but a was never held up by it
    assert code == 2 and "sglbench run: simhost-b unreachable" in text, text[-3000:]
    lines = text.splitlines()
    a_done = lines.index(next(x for x in lines if x.startswith(f"simhost-a: [1/2] TP1 {CUT} recorded")))
    b_plan = lines.index(next(x for x in lines if x.startswith(f"simhost-b: [1/2] TP1 {CUT} plan")))
    assert b_plan < a_done  # in parallel: b began before a had recorded its first attempt
    assert any(x.startswith("simhost-a: [2/2] TP1 qwen3-8b-dflash-tp1 recorded") for x in lines), text[-3000:]
    assert f"  simhost-b: {CUT}: cut (host unreachable in the benchmark phase" in text

    started = re.search(r"^sglbench run: starting run (\S+) on ", text, re.M)
    assert started is not None, text[-3000:]
    run = results / started.group(1)
    for instance in (CUT, "qwen3-8b-dflash-tp1"):
        rec = json.loads((run / "simhost-a" / instance / "record.json").read_text())
        assert rec["outcome"] == "ok", rec.get("failure")
        assert [(p["point"], p["repeat"]) for p in rec["benchmark"]["points"]] == [("c1", 0)]
    assert not (run / "simhost-b" / CUT / "record.json").exists()
    meta = json.loads((run / "_runner" / "run.json").read_text())
    assert meta["status"] == "incomplete"  # resumable once b is back
    assert [(d["host"], d["instance"], d["phase"]) for d in meta["dropped"]] == [
        ("simhost-b", CUT, "benchmark")
    ]
    sh.wait_for(
        lambda: sh.gpus_free(pair["simhost-a"]) and not sh.bench_clients(pair["simhost-a"]), 60, "a free"
    )

    summary = [sys.executable, "-m", "sglbench", "summarize", str(run)]
    md = subprocess.run(summary, env=sh.env(pair["simhost-a"]), capture_output=True, text=True, timeout=300)
    assert md.returncode == 1, md.stderr
    assert "host(s) simhost-a, simhost-b (dropped out)" in md.stdout
    assert f"**Dropped out: simhost-b: unreachable in the benchmark phase of {CUT} (cut" in md.stdout
    csv = subprocess.run(
        [*summary, "--format", "csv"],
        env=sh.env(pair["simhost-a"]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    table = pd.read_csv(io.StringIO(csv.stdout))
    by = {(r.host, r.config): r for r in table.itertuples()}
    assert by[("simhost-a", "qwen3-8b-ar")].outcome == by[("simhost-a", "qwen3-8b-dflash")].outcome == "ok"
    cut = by[("simhost-b", "qwen3-8b-ar")]
    assert cut.outcome == "cut" and not cut.valid and ("simhost-b", "qwen3-8b-dflash") not in by
