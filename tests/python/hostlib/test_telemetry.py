"""hostlib/telemetry.py: nvidia-smi and Prometheus parsing, the load endpoint's numbers, the window, and
the sampler against a fake nvidia-smi on PATH and a loopback HTTP server."""

from __future__ import annotations

import http.server
import json
import math
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from sglbench.hostlib import sglang_facts, telemetry

LOCAL = "%Y/%m/%d %H:%M:%S"


def _smi_time(t: float) -> str:
    return time.strftime(LOCAL, time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _line(t: float, gpu: int, power: str = "312.45", mask: str = "0x0000000000000000") -> str:
    return f"{_smi_time(t)}, {gpu}, {power}, 87, 40, 81234, 2520, 61, {mask}"


# ---------------------------------------------------------------------------------------- parsing


def test_timestamp_is_local_time_with_milliseconds() -> None:
    t = 1_733_350_000.25
    assert telemetry.parse_smi_timestamp(_smi_time(t)) == pytest.approx(t, abs=1e-6)
    assert telemetry.parse_smi_timestamp("yesterday") is None
    assert telemetry.parse_smi_timestamp("2026/13/40 99:00:00.000") is None


def test_gpu_line_with_n_a_and_hex_mask() -> None:
    now = time.time()
    row, from_smi = telemetry.parse_gpu_line(
        f"{_smi_time(now)}, 3, [N/A], [Not Supported], 40, 81234, 1200, 88, 0x0000000000000024", now + 0.01
    )
    assert from_smi
    assert row[0] == pytest.approx(now, abs=0.002)
    assert row[1:] == [3, None, None, 40.0, 81234.0, 1200.0, 88.0, 0x24]
    assert all(v is None or math.isfinite(v) for v in row[2:8])


def test_gpu_line_without_a_usable_timestamp_uses_receipt_time() -> None:
    received = time.time()
    row, from_smi = telemetry.parse_gpu_line("garbage, 0, 100, 1, 1, 1, 1, 1, 0x0", received)
    assert (row[0], from_smi) == (received, False)
    # a timestamp an hour off (another time zone) is not trusted either
    row, from_smi = telemetry.parse_gpu_line(_line(received - 3600, 0), received)
    assert (row[0], from_smi) == (received, False)


@pytest.mark.parametrize(
    "line",
    [
        'Field "clocks_event_reasons.active" is not a valid field to query.',
        "2026/12/04 10:00:00.000, 0, 100",
        "2026/12/04 10:00:00.000, [N/A], 1, 1, 1, 1, 1, 1, 0x0",
    ],
)
def test_malformed_gpu_lines_raise(line: str) -> None:
    with pytest.raises(ValueError):
        telemetry.parse_gpu_line(line, time.time())


def test_throttle_mask_and_numbers() -> None:
    assert telemetry.parse_throttle_mask("0x0000000000000004") == 4
    assert telemetry.parse_throttle_mask("[N/A]") is None
    assert telemetry.parse_throttle_mask("zz") is None
    assert telemetry.parse_number("312.45 W") == 312.45
    assert telemetry.parse_number("nan") is None
    assert telemetry.parse_number("[Not Supported]") is None


PROM = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 2.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",is_streaming="true"} 100.0
sglang:generation_tokens_total{model_name="m",is_streaming="false"} 20.0
sglang:generation_tokens_created{model_name="m"} 1.7e9
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{le="0.1",model_name="m"} 4.0
sglang:queue_time_seconds_sum{model_name="m"} 0.2
sglang:queue_time_seconds_count{model_name="m"} 4.0
# TYPE sglang:weird gauge
sglang:weird{path="a}b \\"q\\" c"} 7
sglang:nan_gauge NaN
python_gc_objects_collected_total{generation="0"} 12.0
"""


def test_prometheus_sums_gauges_and_counters_over_labels() -> None:
    values = telemetry.parse_prometheus(PROM)
    assert values == {"num_running_reqs": 5.0, "generation_tokens_total": 120.0, "weird": 7.0}


def test_load_values_of_both_release_shapes() -> None:
    v1 = {
        "timestamp": "2026-12-04T10:00:00+00:00",
        "version": "0.5.23",
        "loads": [
            {"dp_rank": 0, "num_running_reqs": 2, "token_usage": 0.25, "queues": {"waiting": 1}, "x": [1]},
            {"dp_rank": 1, "num_running_reqs": 3, "token_usage": 0.5, "queues": {"waiting": 0}, "ok": True},
        ],
    }
    assert telemetry.load_values(v1) == {"num_running_reqs": 5.0, "token_usage": 0.75, "queues.waiting": 1.0}
    old = [{"num_reqs": 4, "num_waiting_reqs": 1, "num_tokens": 900, "dp_rank": 0}]
    assert telemetry.load_values(old) == {"num_reqs": 4.0, "num_waiting_reqs": 1.0, "num_tokens": 900.0}


def test_load_endpoint_by_release() -> None:
    assert sglang_facts.load_endpoint("0.5.23") == sglang_facts.V1_LOADS
    assert sglang_facts.load_endpoint("0.5.23+ddtree") == sglang_facts.V1_LOADS
    assert sglang_facts.load_endpoint(sglang_facts.V1_LOADS_SINCE) == sglang_facts.V1_LOADS
    assert sglang_facts.load_endpoint("0.5.9") == sglang_facts.GET_LOAD
    assert sglang_facts.load_endpoint(None) == sglang_facts.V1_LOADS


def test_window_is_first_send_to_last_end_of_measured_requests() -> None:
    rec = SimpleNamespace
    records = [
        rec(warmup=True, sent_s=-5.0, end_s=-4.0),
        rec(warmup=False, sent_s=0.002, end_s=1.5),
        rec(warmup=False, sent_s=0.001, end_s=2.25),
        rec(warmup=False, sent_s=0.5, end_s=None),  # failed: sent, never ended
    ]
    assert telemetry.measured_window(100.0, records) == {"start": 100.001, "end": 102.25}
    assert telemetry.measured_window(100.0, []) == {"start": None, "end": None}


def test_config_validation() -> None:
    cfg = telemetry.TelemetryConfig.from_params(
        {"enabled": True, "gpus": ["0", 2], "load_endpoint": "/v1/loads"}
    )
    assert cfg.gpus == (0, 2) and cfg.gpu_interval_ms == 200 and cfg.metrics is False
    assert telemetry.TelemetryConfig.from_params(None) == telemetry.TelemetryConfig()
    for bad in ({"gpu": [0]}, {"gpus": [-1]}, {"gpu_interval_ms": 1}, {"load_endpoint": "v1/loads"}):
        with pytest.raises(telemetry.TelemetryConfigError):
            telemetry.TelemetryConfig.from_params(bad)
    assert telemetry.nvidia_smi_command(cfg)[-4:] == ["-lms", "200", "-i", "0,2"]


# ---------------------------------------------------------------------------------------- sampling

FAKE_SMI = """#!{python}
import sys, time
args = sys.argv[1:]
ms = int(args[args.index("-lms") + 1])
gpus = [int(g) for g in args[args.index("-i") + 1].split(",")]
assert args[0].startswith("--query-gpu=timestamp,index,power.draw"), args
{extra}
while True:
    now = time.time()
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + ".%03d" % (int(now * 1000) % 1000)
    for g in gpus:
        print(f"{{stamp}}, {{g}}, {{100 + g}}.5, 50, 20, 1000, 1500, 40, 0x0000000000000004", flush=True)
    time.sleep(ms / 1000)
"""


def _fake_smi(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text(FAKE_SMI.format(python=sys.executable, extra=extra))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Handler.hits.append(self.path)
        if self.path == "/metrics":
            body, kind = PROM.encode(), "text/plain"
        elif self.path == "/v1/loads":
            body, kind = (
                json.dumps({"loads": [{"dp_rank": 0, "num_running_reqs": 2}]}).encode(),
                "application/json",
            )
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.hits = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_sampler_gpu_and_server(tmp_path: Path, server: str) -> None:
    cfg = telemetry.TelemetryConfig(
        enabled=True,
        gpus=(0, 1),
        gpu_interval_ms=50,
        server_interval_ms=100,
        metrics=True,
        load_endpoint="/v1/loads",
        nvidia_smi=_fake_smi(tmp_path),
    )
    sampler = telemetry.Sampler(cfg, server)
    sampler.start()
    time.sleep(0.6)
    until = time.time()
    began = time.monotonic()
    parts = sampler.stop(until=until)
    assert time.monotonic() - began < 0.6  # stopping is quick
    rows = parts["gpu"]["rows"]
    assert {r[1] for r in rows} == {0, 1}
    assert parts["gpu"]["t_source"] == "nvidia-smi"
    assert all(r[2] == 100.5 + r[1] and r[8] == 4 for r in rows)
    assert max(r[0] for r in rows if r[1] == 0) >= until - 0.002  # a sample at the window's end
    assert parts["sampling"]["started"] <= min(r[0] for r in rows) + 0.002
    assert parts["sampling"]["stopped"] >= max(r[0] for r in rows)
    server_rows = parts["server"]["rows"]
    assert {(r[1], r[2], r[3]) for r in server_rows} >= {
        ("metrics", "num_running_reqs", 5.0),
        ("load", "num_running_reqs", 2.0),
    }
    assert 3 <= _Handler.hits.count("/metrics") <= 8
    assert parts["errors"] == []
    doc = telemetry.point_telemetry(parts, {"start": until - 0.4, "end": until}, 1.0, 2.0)
    assert doc["schema"] == 1 and doc["clock"] == {"host_started": 1.0, "host_ended": 2.0}
    assert doc["gpu"]["columns"] == list(telemetry.GPU_COLUMNS)
    json.dumps(doc, allow_nan=False)


def test_missing_binary_and_dead_server_are_errors(tmp_path: Path) -> None:
    cfg = telemetry.TelemetryConfig(
        enabled=True,
        gpus=(0,),
        server_interval_ms=50,
        metrics=True,
        load_endpoint="/get_load",
        nvidia_smi=str(tmp_path / "no-such-nvidia-smi"),
    )
    sampler = telemetry.Sampler(cfg, "http://127.0.0.1:9")  # discard port: nothing listens
    sampler.start()
    time.sleep(0.15)
    parts = sampler.stop(until=time.time())
    assert parts["gpu"]["rows"] == [] and parts["server"]["rows"] == []
    errors = " | ".join(parts["errors"])
    assert "cannot run" in errors and "no-such-nvidia-smi" in errors
    assert "GET /metrics failed" in errors and "GET /get_load failed" in errors


def test_nvidia_smi_that_exits_early_says_why(tmp_path: Path, server: str) -> None:
    smi = _fake_smi(
        tmp_path,
        extra='print("Field \\"clocks_event_reasons.active\\" is not a valid field to query.")\nsys.exit(2)',
    )
    cfg = telemetry.TelemetryConfig(enabled=True, gpus=(0,), nvidia_smi=smi, load_endpoint="/nope")
    sampler = telemetry.Sampler(cfg, server)
    sampler.start()
    time.sleep(0.3)
    parts = sampler.stop(until=time.time())
    errors = " | ".join(parts["errors"])
    assert "exited with 2" in errors and "not a valid field" in errors
    assert "GET /nope answered HTTP 404" in errors


def test_a_driver_without_clocks_event_reasons_is_asked_by_the_old_name(tmp_path: Path) -> None:
    smi = _fake_smi(
        tmp_path,
        extra=(
            'if "clocks_event_reasons.active" in args[0]:\n'
            '    print("Field \\"clocks_event_reasons.active\\" is not a valid field to query.")\n'
            "    sys.exit(2)"
        ),
    )
    (tmp_path / "nvidia-smi").write_text(
        (tmp_path / "nvidia-smi")
        .read_text()
        .replace('assert args[0].startswith("--query-gpu=timestamp,index,power.draw"), args\n', "")
    )
    cfg = telemetry.TelemetryConfig(enabled=True, gpus=(0,), gpu_interval_ms=30, nvidia_smi=smi)
    sampler = telemetry.Sampler(cfg, "http://127.0.0.1:9")
    sampler.start()
    sampler.wait_first_samples(3.0)
    parts = sampler.stop(until=time.time())
    assert parts["gpu"]["rows"] and all(r[8] == 4 for r in parts["gpu"]["rows"])
    assert parts["errors"] == []
    assert telemetry.LEGACY_THROTTLE_FIELD in telemetry.nvidia_smi_command(cfg, legacy=True)[1]


def test_stop_terminates_a_stuck_nvidia_smi_quickly(tmp_path: Path) -> None:
    smi = _fake_smi(tmp_path, extra="import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)")
    cfg = telemetry.TelemetryConfig(enabled=True, gpus=(0,), gpu_interval_ms=20, nvidia_smi=smi)
    sampler = telemetry.Sampler(cfg, "http://127.0.0.1:9")
    sampler.start()
    sampler.wait_first_samples(120)  # bounds a failure only: a loaded machine starts the fake slowly
    began = time.monotonic()
    parts = sampler.stop()
    # it does not wait for the process that ignores SIGTERM to exit by itself (it never would): it kills
    # it after its join bounds; what a loaded machine adds to that is scheduling, bounded generously here
    assert time.monotonic() - began < 2 * telemetry.JOIN_TIMEOUT_S + 30
    assert parts["gpu"]["rows"]
    assert sampler._proc is not None and sampler._proc.poll() is not None  # killed, not left behind


def test_point_sampling_hooks(tmp_path: Path) -> None:
    cfg = telemetry.TelemetryConfig(
        enabled=True, gpus=(0,), gpu_interval_ms=30, nvidia_smi=_fake_smi(tmp_path)
    )
    hooks = telemetry.PointSampling(cfg, "http://127.0.0.1:9")
    for _ in range(2):
        hooks.before_point()
        hooks.before_window()  # the first sample is there before the window begins
        window_start = time.time()
        time.sleep(0.15)
        hooks.after_window()
        assert min(r[0] for r in hooks.points[-1]["gpu"]["rows"]) <= window_start
    hooks.before_point()
    hooks.close()  # a point that failed: its sampler stops, nothing is recorded
    assert len(hooks.points) == 2 and len(hooks.stop_seconds) == len(hooks.wait_seconds) == 2
    assert all(0 < p["sampling"]["overhead_s"] < 1.0 for p in hooks.points)
    first, second = hooks.points
    assert first["sampling"]["started"] < second["sampling"]["started"]
    assert all(p["gpu"]["rows"] for p in hooks.points)


def test_sampling_in_a_process_of_its_own_or_in_process(tmp_path: Path) -> None:
    cfg = telemetry.TelemetryConfig(
        enabled=True, gpus=(1,), gpu_interval_ms=30, nvidia_smi=_fake_smi(tmp_path)
    )
    for fork in (True, False):
        hooks = telemetry.PointSampling(cfg, "http://127.0.0.1:9", fork=fork)
        hooks.before_point()
        sampler = hooks._current
        assert isinstance(sampler, telemetry.ForkedSampler if fork else telemetry.Sampler)
        if fork:
            assert sampler.pid is not None and sampler.pid != os.getpid()
            assert not any(t.name.startswith("telemetry-") for t in threading.enumerate())  # none here
        hooks.before_window()
        time.sleep(0.1)
        hooks.after_window()
        (parts,) = hooks.points
        assert parts["errors"] == [] and {r[1] for r in parts["gpu"]["rows"]} == {1}
        json.dumps(parts, allow_nan=False)


def test_a_sampler_process_that_dies_leaves_an_error_not_an_exception(tmp_path: Path) -> None:
    cfg = telemetry.TelemetryConfig(
        enabled=True, gpus=(0,), gpu_interval_ms=30, nvidia_smi=_fake_smi(tmp_path)
    )
    hooks = telemetry.PointSampling(cfg, "http://127.0.0.1:9", fork=True)
    hooks.before_point()
    sampler = hooks._current
    assert isinstance(sampler, telemetry.ForkedSampler) and sampler.pid is not None
    os.kill(sampler.pid, signal.SIGKILL)
    hooks.before_window()
    hooks.after_window()
    (parts,) = hooks.points
    assert parts["gpu"]["rows"] == [] and "ended without its samples" in parts["errors"][0]
