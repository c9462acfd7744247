"""Fault injection on the sim host: what `sglbench run` leaves behind when things go wrong.

One sim host container and one results root (a small tmpfs, so the disk can be filled) for a chain of
campaigns on one config (two benchmark points each). Every scenario ends with the same four checks,
printed as a table at the end:

- points: every committed point is complete (``ok`` with its request rows) or absent, never partial;
- GPUs free: no SGLang unit active, no compute process and no memory in use on any simulated GPU, and no
  benchmark client left running on the host;
- lock honest: the host's locks are free once the campaign and every process of it are gone, and busy
  while any of them still runs;
- resumable: the run is left resumable (or finished), and the next ``sglbench run`` resumes it in place
  and completes it with every expected point exactly once.

Scenarios: controller SIGKILL mid-point; two campaigns at once, with ``--wait`` (queued behind the killed
campaign's tree, then resuming its run) and without (refused, naming the holder; that ``--wait`` never
merges into a live run is tests/python/test_runner.py's ``test_wait_never_merges_into_a_live_campaign``);
Ctrl-C mid-point; the results disk filling up mid-run. Every campaign runs with an API key exported to
``sglbench run``: at the end it must be in no argv (sampled throughout), no world-readable file on the
host, no journal line and nothing on the controller's results disk or in its lock files.

Then a server that hangs mid-point (stopped with SIGSTOP: requests time out), a server SIGKILLed
mid-point, and a GPU host that goes away mid-point (its container killed like a power loss, then started
again). How a dying server's point is classified in detail is tests/python/test_kill_resume.py's.

"Mid-point" is the server's own fact, not a race with the benchmark: the stand-in takes a fault plan
(sglbench/sim/faultplan.py) and stops or kills itself at a chosen generation request, the second of the
second point. A stopped server holds the campaign there while the test deals the controller-side fault
(SIGKILL, Ctrl-C, a full disk, a lost host), then is let go with SIGCONT where the scenario needs it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh

from sglbench import lock, runner

NAME = f"sglbench-simhost-faults-{os.getpid()}"
CONFIG = "qwen3-8b-ar"
INSTANCE = f"{CONFIG}-tp1"
KEYS = ["c1-r0", "c1-r1"]
WAITING = "waiting up to 600 s for GPU host sglbench-simhost"  # what `sglbench run --wait 600` says queued
# Points bounded by their request count (concurrency 1, no warm-up), so the server knows which request is
# the second of the second point: c1-r0 is measured by then, c1-r1 runs.
PROMPTS = 6
POINTS = sh.LOAD | {"duration_s": 0, "num_prompts": PROMPTS}
STRIKE = PROMPTS + 2
PLAN = "/run/sglbench-sim/fault-plan"  # the stand-in's default (its state dir on the sim host)
# Bounds on waiting for a campaign's progress and end. They bound a failure only, never decide a pass: a
# loaded two-core machine takes minutes for what an idle one does in seconds (deploying alone took 3.5 min
# at a load average of 35).
WAIT = 1200
CAMPAIGN = 2400


@pytest.fixture(scope="module")
def sim() -> Any:
    yield from sh.sim_host(NAME)


@pytest.fixture
def disk(tmp_path: Path) -> Any:
    """A 48 MiB tmpfs for the results (skip when this machine cannot mount one)."""
    root = tmp_path / "results"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(root)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the results disk: {mounted.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)


class Chain:
    def __init__(self, tmp: Path, results: Path, key: str) -> None:
        self.tmp, self.results, self.locks, self.key = tmp, results, tmp / "locks", key
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.n = 0
        self.procs: list[subprocess.Popen[str]] = []
        self.leaks: list[str] = []  # key found on the host before it was restarted (a volatile journal)

    def argv(self, *extra: str, load: dict[str, Any] | None = None) -> list[str]:
        return sh.run_argv(NAME, self.results, self.locks, "--configs", CONFIG, *extra, load=load)

    def start(self, *extra: str, **kw: Any) -> tuple[subprocess.Popen[str], Path]:
        self.n += 1
        log = self.tmp / f"run{self.n}.log"
        proc = sh.start(self.argv(*extra, **kw), NAME, log, SGLBENCH_API_KEY=self.key)
        self.procs.append(proc)
        return proc, log

    def end(self) -> None:
        """Whatever failed, no campaign of this test outlives it (each one's keeper then stops its units)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)

    def run(self, *extra: str, **kw: Any) -> tuple[int, str]:
        proc, log = self.start(*extra, **kw)
        return proc.wait(CAMPAIGN), log.read_text()

    def run_now(self, *extra: str) -> subprocess.CompletedProcess[str]:
        env = sh.env(NAME, SGLBENCH_API_KEY=self.key)
        return subprocess.run(
            self.argv(*extra), cwd=sh.REPO, env=env, capture_output=True, text=True, timeout=WAIT
        )

    def run_dir(self, log: str) -> Path:
        m = re.search(r"^sglbench run: (?:starting|resuming) run (\S+) on ", log, re.M)
        if m is None:
            raise AssertionError(f"no run started:\n{log[-2000:]}")
        return self.results / m.group(1)

    def plan(self, action: str) -> None:
        """The next server to become ready will ``stop`` (hang) or ``kill`` itself at request STRIKE."""
        cmd = f"mkdir -p -m 1777 /run/sglbench-sim && rm -f {PLAN}.fired && echo '{action} {STRIKE}' > {PLAN}"
        done = sh.host(NAME, "sh", "-c", cmd)
        assert done.returncode == 0, done.stderr

    def struck(self, log: Path) -> int:
        """Wait until the server dealt itself its planned fault; its pid."""
        fired = f"{PLAN}.fired"
        # no hurry: a struck server waits for the test (stopped), or its run ends without it (killed)
        sh.wait_for(
            lambda: sh.host(NAME, "test", "-s", fired).returncode == 0,
            WAIT,
            "the planned fault",
            log,
            every=1.0,
        )
        return int(sh.host(NAME, "cat", fired).stdout)

    def let_go(self, pid: int) -> None:
        """A stopped server goes on (the fault under test was the controller's, not the server's)."""
        sh.host(NAME, "kill", "-CONT", str(pid))

    def points(self, run: Path) -> Path:
        return run / "simhost" / INSTANCE / "points"

    # -- the four checks ------------------------------------------------------------------------------------
    def points_ok(self, run: Path) -> str:
        for f in sh.point_files(self.points(run)):
            doc = json.loads(f.read_text())  # a partial file would not parse
            if doc["outcome"] == "ok":
                rows = f.with_name(f"{f.stem}.requests.jsonl")
                assert rows.is_file() and rows.read_text().strip(), f"{f}: ok without its request rows"
        return "complete or absent"

    def gpus_ok(self) -> str:
        free = lambda: sh.gpus_free(NAME) and not sh.bench_clients(NAME)  # noqa: E731
        sh.wait_for(free, WAIT, "free GPUs", every=1.0)
        return "free"

    def locks_ok(self) -> str:
        for f in ("sglbench-simhost.lock", "sglbench-simhost.tree.lock"):
            assert lock.probe_free(self.locks / f), f"{f} still held"
        return "free after the end"

    def row(self, scenario: str, points: str, gpus: str, locks: str, resumable: str) -> None:
        self.rows.append((scenario, points, gpus, locks, resumable))

    def table(self) -> str:
        head = ("scenario", "points", "GPUs", "lock", "resumable")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines)


def _meta(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "_runner" / "run.json").read_text())
    return data


def _completed(c: Chain, run: Path) -> None:
    """The config's attempt is ok with every point exactly once. (A resumed run may still exit 1: a point
    can be invalid by the client's own self-check when the machine is loaded; that is not under test.)"""
    rec = json.loads((run / "simhost" / INSTANCE / "record.json").read_text())
    assert rec["outcome"] == "ok", rec.get("failure")
    assert [p.stem for p in sh.point_files(c.points(run), "c*")] == KEYS
    assert [(p["point"], p["repeat"]) for p in rec["benchmark"]["points"]] == [("c1", 0), ("c1", 1)]


@pytest.mark.simhost
def test_fault_injection_table(
    sim: str, disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-faults-" + secrets.token_hex(12)  # every campaign of the chain runs with an API key
    c = Chain(tmp_path, disk, key)
    try:
        with sh.Sampler(NAME, key) as seen:
            _scenarios(c, disk)
    finally:
        c.end()
    # the key, exported to `sglbench run`, appeared in no argv, no readable file, no journal line, no record
    leaks = seen.hits + c.leaks + sh.grep_host(NAME, key) + sh.grep_tree(key, disk, c.locks)
    assert seen.server_seen and not leaks, leaks
    # the search itself finds a key where one is: a planted readable file and journal line
    probe = "sk-probe-" + secrets.token_hex(8)
    planted = sh.host(NAME, "sh", "-c", f"echo {probe} > /etc/sglbench-probe && logger -t sglbench {probe}")
    assert planted.returncode == 0, planted.stderr
    sh.wait_for(lambda: len(sh.grep_host(NAME, probe)) == 2, WAIT, "the planted key to be found")
    assert "/etc/sglbench-probe" in sh.grep_host(NAME, probe)
    c.row(
        "API key exported to sglbench run", "-", "-", "-", "in no argv, readable file, journal line, record"
    )
    with capsys.disabled():  # the table, in every `make test` log
        print(f"\n\nFault injection on the sim host ({Path(__file__).name}):\n{c.table()}\n")


def _scenarios(c: Chain, disk: Path) -> None:

    # 1. controller SIGKILL mid-point: the orphaned tree keeps the host busy, then stops the unit and exits.
    #    The server holds the second point until the controller is gone.
    c.plan("stop")
    proc, log = c.start(load=POINTS)
    server = c.struck(log)
    proc.kill()
    proc.wait(30)
    run_a = c.run_dir(log.read_text())
    with pytest.raises(lock.LockBusy) as busy, lock.lock_hosts(["sglbench-simhost"], c.locks):
        pass  # a second campaign now would overlap the orphaned tree: refused
    assert busy.value.tree and busy.value.holder is not None, str(busy.value)
    # 2. two campaigns at once: B (--wait) queues behind A's orphaned tree, then resumes A in place; C,
    #    without --wait while B runs, is refused naming B (that --wait never joins a live run: test_runner.py)
    #    The tree's cleanup can end before a loaded machine has started B: its keeper (the tree lock's holder,
    #    which holds the lock until it exits) is paused until B is seen queuing, then let go.
    keeper = busy.value.holder.pid
    os.kill(keeper, signal.SIGSTOP)
    try:
        c.let_go(server)  # the orphaned tree's point goes on
        b, log_b = c.start("--wait", "600", load=POINTS)  # the same load: A's attempt, resumed in place
        sh.wait_for(lambda: WAITING in log_b.read_text(), WAIT, "B to queue behind the tree", log_b)
    finally:
        os.kill(keeper, signal.SIGCONT)
    sh.wait_for(lambda: lock.probe_free(c.locks / "sglbench-simhost.tree.lock"), WAIT, "the tree to end")
    state = json.loads(next((run_a / "_runner").glob("tree-*.json")).read_text())
    assert state["phase"] == "cleaned" and state["parent_alive"] is False, state
    points_a, gpus_a = c.points_ok(run_a), c.gpus_ok()  # before B reaches its start phase
    c.row("controller SIGKILL mid-point", points_a, gpus_a, "busy while its tree lived, then free", "yes")
    sh.wait_for(lambda: " plan," in log_b.read_text(), WAIT, "B to start its config", log_b)
    refused = c.run_now()
    assert refused.returncode == 2 and "is busy: held by" in refused.stderr, refused.stderr
    assert b.wait(CAMPAIGN) in (0, 1), log_b.read_text()[-3000:]
    text_b = log_b.read_text()
    assert WAITING in text_b  # queued behind the tree
    assert c.run_dir(text_b) == run_a  # its owner provably gone: resumed in place ...
    _completed(c, run_a)  # ... and completed: every point exactly once
    assert _meta(run_a)["status"] == "finished"
    c.row(
        "two campaigns, no --wait", "untouched", c.gpus_ok(), "refused, holder named", "n/a (never started)"
    )
    c.row("two campaigns, --wait", c.points_ok(run_a), c.gpus_ok(), c.locks_ok(), "queued, then resumed A")

    # 3. Ctrl-C mid-point: the units are stopped, the run stays resumable
    c.plan("stop")
    e, log_e = c.start("--fresh", load=POINTS)
    server = c.struck(log_e)
    run_e = c.run_dir(log_e.read_text())
    e.send_signal(signal.SIGINT)
    c.let_go(server)
    assert e.wait(WAIT) == runner.EXIT_INTERRUPTED, log_e.read_text()[-3000:]
    assert _meta(run_e)["status"] == "interrupted"
    c.row("Ctrl-C mid-point", c.points_ok(run_e), c.gpus_ok(), c.locks_ok(), "yes (status interrupted)")

    # 4. the results disk fills up mid-run: the server is stopped anyway, exit 2, still resumable. The disk
    #    fills while the server holds the second point, before the ladder's points are committed.
    c.plan("stop")
    f, log_f = c.start("--fresh", load=POINTS)
    server = c.struck(log_f)
    run_f = c.run_dir(log_f.read_text())
    filler = disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)  # until ENOSPC
    c.let_go(server)
    code = f.wait(CAMPAIGN)
    text = log_f.read_text()
    assert c.run_dir(text) == run_f
    assert code == 2 and ("results disk is full" in text or "No space left on device" in text), text[-3000:]
    assert "could not" in text and "stopped" in text, text[-3000:]  # said so, and the units were stopped
    gpus = c.gpus_ok()
    filler.unlink()
    assert _meta(run_f)["status"] in runner.RESUMABLE
    code, text = c.run(load=POINTS)
    assert code in (0, 1) and c.run_dir(text) == run_f, text[-3000:]
    _completed(c, run_f)
    c.row(
        "results disk full mid-run",
        c.points_ok(run_f),
        gpus,
        c.locks_ok(),
        "yes: completed once space was freed",
    )

    # 5. the server hangs mid-point: its requests time out, the point is kept invalid (never reused), the
    #    unit is stopped, and the run resumed by id measures that point again on a fresh server
    hang_load = POINTS | {"request_timeout_s": 3}
    c.plan("stop")  # never let go: the server hangs in the second point
    g, log_g = c.start("--fresh", load=hang_load)
    c.struck(log_g)
    run_g = c.run_dir(log_g.read_text())
    code = g.wait(CAMPAIGN)
    text = log_g.read_text()
    assert code == 1, text[-3000:]
    # the point measured before the hang is kept; the one measured against the frozen server failed, or
    # was kept with its requests counted failed
    after = {p.stem: json.loads(p.read_text()) for p in sh.point_files(c.points(run_g), "c*")}
    assert after[KEYS[0]]["outcome"] == "ok", after[KEYS[0]]
    hung = after.get(KEYS[1]) or {"outcome": "absent"}
    outcome, reasons = hung["outcome"], (hung.get("summary") or {}).get("invalid_reasons") or []
    assert outcome == "failed" or any(
        "requests failed" in r or "no request succeeded" in r for r in reasons
    ), (outcome, reasons)
    points_g, gpus_g = c.points_ok(run_g), c.gpus_ok()
    code, text = c.run("--run-id", run_g.name, load=hang_load)
    assert code in (0, 1) and c.run_dir(text) == run_g, text[-3000:]
    _completed(c, run_g)
    c.row(
        "server hang mid-point (SIGSTOP)",
        f"{points_g}; the hung point kept invalid",
        gpus_g,
        c.locks_ok(),
        "yes: --run-id re-measured the hung point",
    )

    # 6. the server is SIGKILLed mid-point: the attempt fails in the bench phase, nothing it measured after
    #    the kill is kept valid, the run resumed by id measures the rest on a fresh server
    c.plan("kill")  # in the second point
    k, log_k = c.start("--fresh", load=POINTS)
    c.struck(log_k)
    run_k = c.run_dir(log_k.read_text())
    code = k.wait(CAMPAIGN)
    text = log_k.read_text()
    assert code == 1, text[-3000:]
    failure = json.loads((run_k / "simhost" / INSTANCE / "record.json").read_text()).get("failure") or {}
    assert (failure.get("phase"), failure.get("cause")) == ("bench", "server_exited"), failure
    points_k, gpus_k = c.points_ok(run_k), c.gpus_ok()
    code, text = c.run("--run-id", run_k.name, load=POINTS)
    assert code in (0, 1) and c.run_dir(text) == run_k, text[-3000:]
    _completed(c, run_k)
    c.row(
        "server SIGKILLed mid-point",
        f"{points_k}; the attempt failed (bench: server_exited)",
        gpus_k,
        c.locks_ok(),
        "yes: --run-id measured the rest",
    )

    # 7. the GPU host goes away mid-point (container killed like a power loss): exit 2 naming the host, the
    #    run resumable; once the host is back, the next run resumes it in place and completes it
    c.plan("stop")  # the host goes while its server holds the second point
    h, log_h = c.start("--fresh", load=POINTS)
    c.struck(log_h)
    run_h = c.run_dir(log_h.read_text())
    c.leaks += sh.grep_host(NAME, c.key)  # its journal does not survive the restart: look now
    killed = subprocess.run(["podman", "kill", NAME], env=sh.env(NAME), capture_output=True, text=True)
    assert killed.returncode == 0, killed.stderr
    code = h.wait(CAMPAIGN)
    text = log_h.read_text()
    assert code == 2 and "simhost" in text, text[-3000:]
    assert _meta(run_h)["status"] in runner.RESUMABLE, _meta(run_h)
    points_h, locks_h = c.points_ok(run_h), c.locks_ok()
    back = subprocess.run(["podman", "start", NAME], env=sh.env(NAME), capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    sh.wait_for(
        lambda: sh.host(NAME, "systemctl", "is-system-running").stdout.strip() in ("running", "degraded"),
        WAIT,
        "the sim host to boot again",
    )
    code, text = c.run(load=POINTS)
    assert code in (0, 1) and c.run_dir(text) == run_h, text[-3000:]
    _completed(c, run_h)
    c.row(
        "GPU host lost mid-point (container killed, restarted)",
        points_h,
        c.gpus_ok(),
        locks_h,
        "yes: exit 2, resumed in place once the host was back",
    )
