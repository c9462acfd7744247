"""The SSH connection to the GPU host drops while a benchmark point runs (the sim host over SSH).

One sim host container, reached over SSH as inventory/sim reaches it (scripts/simhost.sh up: a loopback
port, our key, its recorded host key). While the second point of a one-config campaign runs, its sshd
listener is stopped and every sshd session process is killed (the campaign's connection with it), the
way a network cut or an sshd restart ends a real connection. The benchmark client on the host outlives
its connection, as a real one does.

The cut lands inside the second point whatever the machine's speed: once the first point is spooled and
the second is not, a watcher inside the host stops the client (tests/python/client_hold.py), which then
cannot finish its point; it stays stopped until the host guard (or the stop phase) ends it, as it would
end a client still sending load.

The ladder's points are one host call, which keeps each finished point in the host's spool
(python/sglbench/hostlib/point_spool.py) until the controller has committed it.

- sshd back within ssh's retries (ansible.cfg: pauses 0, 1, 3, 7, 15 s): Ansible runs the call again on
  a fresh connection, the host guard ends the cut-off client first (it can never deliver its result), the
  point it had finished comes from the spool as it was, and the cut point is measured afresh: the
  campaign completes, the cut point's requests all start after the cut, it names the client it replaced
  (``ended_client``), nothing the cut client measured of it is committed;
- sshd down past the retries: the host is unreachable, `sglbench run` exits 2 naming the attempt, phase
  and task it cut; nothing is committed, the server is still up (nobody can reach the host to stop it),
  the run stays resumable; once sshd is back the next `sglbench run` resumes the run in place, its stop
  phase stops that server and frees the GPUs, and its call returns what the cut-off call had spooled and
  measures whatever is missing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh
from client_hold import hold_client

from sglbench import lock, runner

NAME = f"sglbench-simhost-ssh-{os.getpid()}"
INSTANCE = "qwen3-8b-ar-tp1"
KEYS = ["c1-r0", "c1-r1"]
# Points that outlast the watcher's reaction (a look every 50 ms from inside the host) by far; the cut
# itself waits for nothing, the client being stopped.
LOAD = sh.LOAD | {"duration_s": 6}
SPOOL = f"/run/sglbench/spool/*-{INSTANCE}"


@pytest.fixture(scope="module")
def sim() -> Any:
    yield from sh.sim_host(NAME)


class Campaign:
    def __init__(self, tmp: Path) -> None:
        self.results, self.locks, self.tmp, self.n = tmp / "results", tmp / "locks", tmp, 0

    def start(self, load: dict[str, Any] = LOAD) -> tuple[subprocess.Popen[str], Path]:
        self.n += 1
        log = self.tmp / f"run{self.n}.log"
        return sh.start(sh.run_argv(NAME, self.results, self.locks, load=load), NAME, log), log

    def run_dir(self, log: Path) -> Path:
        m = re.search(r"^sglbench run: (?:starting|resuming) run (\S+) on ", log.read_text(), re.M)
        assert m is not None, log.read_text()[-2000:]
        return self.results / m.group(1)

    def points(self, log: Path) -> Path:
        return self.run_dir(log) / "simhost" / INSTANCE / "points"

    def committed(self, log: Path) -> set[str]:
        try:
            return {p.stem for p in sh.point_files(self.points(log), "c*")}
        except AssertionError:
            return set()


def _cut_connections(name: str) -> list[str]:
    """Stop the sshd listener, then kill every sshd session process (by pid) and with it each connection."""
    stopped = sh.host(name, "systemctl", "stop", "ssh.service")
    assert stopped.returncode == 0, stopped.stderr
    ps = sh.host(name, "ps", "-eo", "pid=,args=").stdout
    sessions = [ln.split()[0] for ln in ps.splitlines() if re.search(r"\bsshd: \S+@", ln)]
    assert sessions, ps  # the campaign's connection was up
    killed = sh.host(name, "kill", "-KILL", *sessions)
    assert killed.returncode == 0, killed.stderr
    return sessions


def _start_sshd(name: str) -> None:
    started = sh.host(name, "systemctl", "start", "ssh.service")
    assert started.returncode == 0, started.stderr


def _spooled(name: str) -> dict[str, dict[str, Any]]:
    """The points the host keeps for the attempt (its spool), by key: each as the call measured it."""
    script = f"for f in /run/sglbench/spool/*-{INSTANCE}/*.json; do [ -f $f ] && cat $f && echo; done"
    out = sh.host(name, "sh", "-c", script)
    docs = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return {d["key"]: d["point"] for d in docs}


def _second_point_held() -> tuple[dict[str, Any], dict[str, Any]]:
    """Stop the client inside point c1-r1 (client_hold): its holder line and c1-r0's summary as the
    spool had them then."""
    seen = hold_client(NAME, SPOOL, ["c1-r0"], "c1-r1")
    return seen["holder"], seen["points"]["c1-r0"]["summary"]


def _record(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "simhost" / INSTANCE / "record.json").read_text())
    return data


def _alive(name: str, pid: int) -> bool:
    return sh.host(name, "kill", "-0", str(pid)).returncode == 0


def _meta(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "_runner" / "run.json").read_text())
    return data


@pytest.mark.simhost
def test_a_connection_cut_mid_point_is_retried_and_the_point_measured_again(sim: str, tmp_path: Path) -> None:
    c = Campaign(tmp_path)
    proc, log = c.start()
    try:
        cut_client, before = _second_point_held()
        cut_at = time.time()
        _cut_connections(NAME)
        time.sleep(2.0)  # inside the retry window
        _start_sshd(NAME)
        code = proc.wait(600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    text = log.read_text()
    # exit 1 only when the client's self-check marked a point invalid on a loaded machine (not under test)
    assert code in (0, 1), text[-3000:]
    run = c.run_dir(log)
    rec = _record(run)
    assert rec["outcome"] == "ok", rec.get("failure")
    assert [(p["point"], p["repeat"]) for p in rec["benchmark"]["points"]] == [("c1", 0), ("c1", 1)]
    # the point finished before the cut is committed as the cut-off call measured it (from the spool)
    assert json.loads((c.points(log) / "c1-r0.json").read_text())["summary"]["t0_unix"] == before["t0_unix"]
    assert before["t0_unix"] < cut_at
    # the cut point was measured again by a new client, after the rerun's host guard ended the cut-off one
    # (held mid-point, it could neither finish nor end by itself) and said so
    redone = json.loads((c.points(log) / "c1-r1.json").read_text())
    assert redone["outcome"] == "ok", redone["summary"]
    ended = redone["summary"].get("ended_client")
    assert ended is not None and ended["pid"] == cut_client["pid"], redone["summary"]
    assert "connection to the controller was lost" in ended["reason"]
    assert rec["benchmark"]["points"][1]["ended_client"]["pid"] == cut_client["pid"]  # in the record too
    assert not _alive(NAME, cut_client["pid"])
    rows = [json.loads(ln) for ln in (c.points(log) / "c1-r1.requests.jsonl").read_text().splitlines()]
    assert rows and min(r["t0_unix"] for r in rows) > cut_at  # nothing the cut-off client measured
    assert sh.gpus_free(NAME) and not sh.bench_clients(NAME)
    for f in ("sglbench-simhost.lock", "sglbench-simhost.tree.lock"):
        assert lock.probe_free(c.locks / f), f"{f} still held"


@pytest.mark.simhost
def test_a_connection_down_past_the_retries_stops_cleanly_and_the_next_run_resumes(
    sim: str, tmp_path: Path
) -> None:
    c = Campaign(tmp_path)
    proc, log = c.start()
    try:
        _, before = _second_point_held()
        _cut_connections(NAME)
        code = proc.wait(600)  # sshd stays down: every retry is refused
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        _start_sshd(NAME)
    text = log.read_text()
    run = c.run_dir(log)
    assert code == 2, text[-3000:]
    assert re.search(
        rf"simhost unreachable: .*\(during {INSTANCE}, benchmark: task .*Measure and commit", text
    ), text[-3000:]
    assert _meta(run)["status"] in runner.RESUMABLE, _meta(run)
    assert c.committed(log) == set()  # the call never returned; the host keeps what it measured
    assert "c1-r0" in _spooled(NAME)
    assert not sh.gpus_free(NAME)  # nobody could reach the host to stop its server
    code, text = _resume(c)
    assert code in (0, 1) and c.run_dir(c.tmp / f"run{c.n}.log") == run, text[-3000:]
    rec = _record(run)
    assert rec["outcome"] == "ok", rec.get("failure")
    assert sorted(c.committed(log)) == KEYS
    assert rec["benchmark"]["resume"]["reused"] == [] and rec["benchmark"]["resume"]["measured"] == KEYS
    # c1-r0 as the cut-off call measured it, not again
    assert json.loads((c.points(log) / "c1-r0.json").read_text())["summary"]["t0_unix"] == before["t0_unix"]
    assert _spooled(NAME) == {}  # committed: the final stop removed the spool
    assert sh.gpus_free(NAME) and not sh.bench_clients(NAME)


def _resume(c: Campaign) -> tuple[int, str]:
    proc, log = c.start()
    try:
        return proc.wait(600), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
