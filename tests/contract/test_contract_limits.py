"""Contract, limits: a server whose KV pool (--max-total-tokens 1024) is below the model's context
(2048), with --max-running-requests 2 and --max-queued-requests 2; the last test SIGKILLs the launcher."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from contract_lib import (
    STOP_WITHIN,
    Server,
    check,
    comm,
    first,
    group_members,
    log_shape,
    need_real_env,
    sse,
    start_real,
    start_stand_in,
    wait_gone,
)

MAX_RUNNING, MAX_QUEUED = 2, 2
LIMITS = ["--max-total-tokens", "1024", "--max-running-requests", str(MAX_RUNNING)]
LIMITS += ["--max-queued-requests", str(MAX_QUEUED)]
FINISHED_WITHIN_LIMITS = "more than --max-running-requests, at most it plus --max-queued-requests"
# The stand-in decodes the tiny model on a simulated GPU in microseconds; heavier simulated weights on
# a slow simulated memory bus make a 300-token request take ~1.5 s as on the real CPU engine, so that
# the requests overlap as they do there (a decode step reads the weights once: 0.5 GiB at 1 GB/s,
# times the time scale 0.01 = 5 ms).
SLOW = {"SGLBENCH_SIM_WEIGHTS_GIB": "0.5", "SGLBENCH_SIM_GPU_BANDWIDTH_GBPS": "1"}


@pytest.fixture(scope="module", params=[pytest.param("real", marks=pytest.mark.real), "stand-in"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(f"contract-limits-{request.param}")
    if request.param == "real":
        need_real_env()
        srv = start_real(tmp / "server.log", LIMITS)
    else:
        srv = start_stand_in(tmp / "server.log", LIMITS, tmp / "state", env=SLOW)
    try:
        yield srv
    finally:
        srv.stop()


def test_kv_pool_below_the_context(server: Server) -> None:
    info = server.get("/server_info").json()
    limit = info["max_req_input_len"]
    over = server.post("/generate", {"input_ids": [5] * 1500, "sampling_params": {"max_new_tokens": 1}})
    # input + max_new_tokens fit the context (the tokenizer lets it through): the scheduler caps
    # max_new_tokens at max_req_len - input - 1
    capped = server.post(
        "/generate", {"input_ids": [5] * 1000, "sampling_params": {"max_new_tokens": 100, "ignore_eos": True}}
    )
    default = server.post("/generate", {"input_ids": [6] * 1000, "sampling_params": {"ignore_eos": True}})
    lines = server.log_text().splitlines()
    observed = {
        "warning": log_shape(first(lines, r"KV pool holds")),
        "summary": log_shape(first(lines, r"max_total_num_tokens=")),
        "max_total_num_tokens": info["max_total_num_tokens"],
        "max_req_input_len": limit,
        "effective_max_running_requests": info["internal_states"][0]["effective_max_running_requests_per_dp"],
        "input_1500": [over.status_code, over.text],
        "input_1000_max_new_100": [capped.status_code, capped.json()["meta_info"]["finish_reason"]],
        "input_1000_default_max_new": [default.status_code, default.json()["meta_info"]["finish_reason"]],
    }
    check(server.side, "errors.kv_below_context", observed)


def test_requests_over_max_running_requests_queue(server: Server) -> None:
    """Six streamed requests at once: two run, two wait, two find the queue full (an abort event)."""
    results: dict[int, tuple[int, list[str]]] = {}

    def go(i: int) -> None:
        body = {
            "text": f"request {i}",
            "stream": True,
            "sampling_params": {"max_new_tokens": 300, "ignore_eos": True},
        }
        r = server.post("/generate", body, stream=True)
        results[i] = (r.status_code, sse(r)[1])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    # The most running and waiting requests seen while they are in flight (polled, not one read after a
    # fixed sleep: a loaded CI machine may be between two states at any one instant).
    busy = {"num_running_reqs": 0, "num_waiting_reqs": 0}
    deadline = time.monotonic() + 120
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        load = server.get("/v1/loads").json()["loads"][0]
        for k in busy:
            busy[k] = max(busy[k], load[k])
        time.sleep(0.05)
    for t in threads:
        t.join(timeout=120)
    finished, aborted = [], []
    for status, events in results.values():
        last = json.loads(events[-2])
        reason = last["meta_info"]["finish_reason"]
        (aborted if reason["type"] == "abort" else finished).append((status, events, last, reason))
    abort = aborted[0][2] if aborted else {}
    # Which of the six find the queue full depends on when each one reaches the scheduler (a loaded
    # machine admits them at other instants), so the counts are held to what the limits allow: more
    # than --max-running-requests finish (some waited), at most it plus --max-queued-requests, the rest
    # are aborted; a count outside that is reported as the number itself.
    n_finished, n_aborted = len(finished), len(aborted)
    waiting = busy["num_waiting_reqs"]
    observed = {
        "statuses": sorted(r[0] for r in results.values()),
        "finished": (
            FINISHED_WITHIN_LIMITS if MAX_RUNNING < n_finished <= MAX_RUNNING + MAX_QUEUED else n_finished
        ),
        "aborted": "the rest" if n_aborted >= 1 and n_finished + n_aborted == len(threads) else n_aborted,
        "finished_lengths": sorted({len(e[2]["output_ids"]) for e in finished}),
        "abort_events": sorted({len(a[1]) for a in aborted}),
        "abort_event": {
            "keys": sorted(abort),
            "meta_info_keys": sorted(abort.get("meta_info", {})),
            "finish_reason": abort.get("meta_info", {}).get("finish_reason"),
            "text": abort.get("text"),
            "output_ids": abort.get("output_ids"),
        },
        "while_busy": {
            "running": busy["num_running_reqs"],
            "waiting": f"1-{MAX_QUEUED}" if 1 <= waiting <= MAX_QUEUED else waiting,
        },
    }
    check(server.side, "queue.over_max_running", observed)


def test_sigkill_of_the_launcher_takes_its_subprocesses(server: Server) -> None:
    members = group_members(server.pid)
    names = sorted({n for p in members if (n := comm(p)) and n.startswith("sglang::")})
    os.kill(server.pid, signal.SIGKILL)
    gone, _seconds = wait_gone(server.pid, STOP_WITHIN)
    code = server.launcher_exit_code()
    observed = {
        "subprocesses": names,
        # serve.sh reports a signal death as 128 + signal, the stand-in's Popen as -signal
        "launcher_killed_by": "SIGKILL" if code in (-signal.SIGKILL, 128 + signal.SIGKILL) else code,
        "group_gone": gone,
    }
    check(server.side, "shutdown.sigkill", observed)
