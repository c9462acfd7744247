"""The real SGLang (pinned, CPU engine, tiny random-weight model) answering the API the project uses.

One server (scripts/real-sglang/serve.sh, tiny-qwen2), shared with the real side of the contract
suite's API module (real_sglang.shared_server: one start per session); tests run in order against
it, and the last one stops it with SIGTERM, after every other test that uses it.

What the server says (key lists, metric names, error texts, stop behaviour) is compared with the
recorded contract in tests/fixtures/real_sglang/<version>/, the data that contract tests of the
stand-in (python/sglbench/sim) can be held against. Each run also writes what it saw, plus timings
and peak memory, to build/real_sglang/<version>/. To re-record after a deliberate change:
    SGLBENCH_REAL_SGLANG_RECORD=1 make test-real
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from real_sglang import (
    CONTEXT_LENGTH,
    HAVE_ENV,
    LOG_LINES,
    NO_REAL_ENV,
    RECORD,
    REPO,
    STOP_WITHIN,
    VERSION,
    NotReady,
    Started,
    group_members,
    shared_server,
    stops_shared_server,
)

CONTRACT = REPO / "tests" / "fixtures" / "real_sglang" / VERSION
OBSERVED = REPO / "build" / "real_sglang" / VERSION

pytestmark = pytest.mark.real
if not HAVE_ENV:  # one skip line for the module, not one per test
    pytest.skip(NO_REAL_ENV, allow_module_level=True)

PROMPT = "The quick brown fox jumps over the lazy dog."


# --- the server ---------------------------------------------------------------------------------


def memory_kb(pids: list[int]) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) over pids, in kB; PSS counts shared pages once."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss, pss


@dataclass
class Server:
    started: Started  # the session's shared real server (real_sglang.shared_server)
    peak_rss_kb: int = 0
    peak_pss_kb: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    _stop_sampling: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return self.started.url

    @property
    def pid(self) -> int:  # SGLang's launcher (python -m sglang.launch_server), leader of its process group
        return self.started.pid

    @property
    def log(self) -> Path:
        return self.started.log

    def sample_memory(self) -> None:
        while not self._stop_sampling.wait(0.5):
            rss, pss = memory_kb(group_members(self.pid))
            self.peak_rss_kb = max(self.peak_rss_kb, rss)
            self.peak_pss_kb = max(self.peak_pss_kb, pss)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The shared real server (serve.sh's flags; the contract suite's real API side checks it too). The
    module's last test stops it; the session stops whatever is left."""
    module_t0 = time.monotonic()
    try:
        srv = Server(shared_server())
    except NotReady as err:
        pytest.fail(str(err))
    sampler = threading.Thread(target=srv.sample_memory, daemon=True)
    sampler.start()
    yield srv
    srv._stop_sampling.set()
    sampler.join()
    srv.timings["module_seconds"] = round(time.monotonic() - module_t0, 1)
    save_observed(
        "timings",
        {
            "start_seconds": srv.started.seconds,
            **srv.timings,
            "peak_rss_mb": srv.peak_rss_kb // 1024,
            "peak_pss_mb": srv.peak_pss_kb // 1024,
        },
    )


# --- the recorded contract ----------------------------------------------------------------------


def save_observed(name: str, data: object) -> None:
    OBSERVED.mkdir(parents=True, exist_ok=True)
    (OBSERVED / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def contract(name: str, observed: dict) -> dict:
    """Save what was seen; return the recorded contract (re-recorded when SGLBENCH_REAL_SGLANG_RECORD=1)."""
    save_observed(name, observed)
    path = CONTRACT / f"{name}.json"
    if RECORD:
        CONTRACT.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(observed, indent=2, sort_keys=True) + "\n")
    if not path.exists():
        pytest.fail(
            f"no recorded contract {path.relative_to(REPO)}; "
            "record it with SGLBENCH_REAL_SGLANG_RECORD=1 make test-real"
        )
    return json.loads(path.read_text())


def post(srv: Server, path: str, body: dict, **kw) -> requests.Response:
    return requests.post(srv.url + path, json=body, timeout=120, **kw)


def sse_events(resp: requests.Response) -> tuple[bytes, list[str]]:
    """The raw body and its `data:` payloads, checking the framing on the way."""
    raw = b"".join(resp.iter_content(chunk_size=None))
    assert raw.endswith(b"\n\n"), raw[-200:]
    events = []
    for block in raw.decode().split("\n\n")[:-1]:
        assert block.startswith("data: "), block[:200]
        assert "\n" not in block, block[:200]  # one data line per event
        events.append(block[len("data: ") :])
    return raw, events


# --- the tests, in order ------------------------------------------------------------------------


def test_health(server: Server) -> None:
    for path in ("/health", "/health_generate"):
        r = requests.get(server.url + path, timeout=60)
        assert r.status_code == 200, (path, r.status_code, r.text[:500])


def test_server_info_model_info_and_models(server: Server) -> None:
    info = requests.get(server.url + "/server_info", timeout=30).json()
    model_info = requests.get(server.url + "/model_info", timeout=30).json()
    models = requests.get(server.url + "/v1/models", timeout=30).json()
    states = info.get("internal_states") or [{}]
    observed = {
        "server_info_keys": sorted(info),
        "internal_states_keys": sorted(states[0]),
        "model_info_keys": sorted(model_info),
        "v1_models_keys": sorted(models),
        "v1_models_data_keys": sorted(models["data"][0]),
        "values": {
            "version": info.get("version"),
            "device": info.get("device"),
            "attention_backend": info.get("attention_backend"),
            "context_length": info.get("context_length"),
            "max_total_num_tokens": info.get("max_total_num_tokens"),
            "v1_models_max_model_len": models["data"][0].get("max_model_len"),
        },
    }
    want = contract("server_info", observed)
    assert info["version"] == VERSION
    assert models["data"][0]["max_model_len"] == CONTEXT_LENGTH
    assert observed == want


def test_generate_non_streamed(server: Server) -> None:
    r = post(
        server,
        "/generate",
        {"text": PROMPT, "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}},
    )
    assert r.status_code == 200, r.text[:1000]
    out = r.json()
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 8
    assert len(out["output_ids"]) == 8
    assert meta["finish_reason"] == {"type": "length", "length": 8}
    assert meta["prompt_tokens"] > 0
    assert isinstance(out["text"], str) and out["text"]
    observed = {
        "top_keys": sorted(out),
        "meta_info_keys": sorted(meta),
        "finish_reason": meta["finish_reason"],
    }
    assert observed == contract("generate", observed)


def test_generate_streamed(server: Server) -> None:
    r = post(
        server,
        "/generate",
        {
            "text": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True},
        },
        stream=True,
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers
    raw, events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks
    # text and output_ids are cumulative: each chunk repeats what came before
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts)), texts
    ids = [c["output_ids"] for c in chunks]
    assert all(b[: len(a)] == a for a, b in itertools.pairwise(ids)), ids
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == [len(i) for i in ids] and counts == sorted(counts) and counts[-1] == 16, counts
    assert [c["meta_info"]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 16}
    non_final = sorted({k for c in chunks[:-1] for k in c["meta_info"]})
    observed = {
        "content_type": r.headers["content-type"],
        "ends_with": raw[raw.rindex(b"}") + 1 :].decode(),
        "chunk_keys": sorted(chunks[0]),
        "non_final_meta_info_keys": non_final or None,
        "final_meta_info_keys": sorted(chunks[-1]["meta_info"]),
        "cumulative": ["text", "output_ids"],
    }
    want = contract("generate_stream", observed)
    if not non_final:  # it all came in one chunk this time: nothing to compare for the others
        observed["non_final_meta_info_keys"] = want["non_final_meta_info_keys"]
    assert observed == want


def test_chat_completions_streamed_usage(server: Server) -> None:
    r = post(
        server,
        "/v1/chat/completions",
        {
            "model": "anything",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 4,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        stream=True,
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers
    _, events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finals] == ["length"]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + 4
    assert all(c.get("usage") is None for c in chunks[:-1])
    observed = {
        "chunk_keys": sorted(chunks[0]),
        "choice_keys": sorted(chunks[0]["choices"][0]),
        "first_delta_keys": sorted(chunks[0]["choices"][0]["delta"]),
        "usage_chunk_keys": sorted(usage_chunk),
        "usage_keys": sorted(usage),
    }
    assert observed == contract("chat_stream", observed)


def test_metrics(server: Server) -> None:
    r = requests.get(server.url + "/metrics", timeout=30)
    assert r.status_code == 200
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", r.text, re.M))
    samples = {m.split("{")[0] for m in re.findall(r"^([^#\s]\S*?)(?:\{[^}]*\})? \S+$", r.text, re.M)}
    assert types, r.text[:500]
    assert all(name.startswith("sglang:") for name in types), sorted(n for n in types if "sglang:" not in n)
    assert all(name.startswith("sglang:") for name in samples)
    for name in (
        "sglang:time_to_first_token_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
    ):
        assert name in types, name
    labels = sorted(set(re.findall(r"(\w+)=\"", r.text)))
    observed = {"types": types, "label_names": labels}
    want = contract("metrics", observed)
    # A metric may appear only once its first event happened: all recorded names must be there.
    assert set(want["types"].items()) <= set(types.items()), set(want["types"]) - set(types)


def test_inputs_longer_than_the_context(server: Server) -> None:
    long_ids = [5] * (CONTEXT_LENGTH + 52)
    long_text = "fox jumps " * 1500
    cases = {
        "generate_input_ids": (
            "/generate",
            {"input_ids": long_ids, "sampling_params": {"max_new_tokens": 4}},
        ),
        "generate_text": ("/generate", {"text": long_text, "sampling_params": {"max_new_tokens": 4}}),
        "generate_input_plus_max_new_tokens": (
            "/generate",
            {"input_ids": [5] * (CONTEXT_LENGTH - 8), "sampling_params": {"max_new_tokens": 100}},
        ),
        "chat": (
            "/v1/chat/completions",
            {"model": "x", "max_tokens": 4, "messages": [{"role": "user", "content": long_text}]},
        ),
        "chat_streamed": (
            "/v1/chat/completions",
            {
                "model": "x",
                "max_tokens": 4,
                "stream": True,
                "messages": [{"role": "user", "content": long_text}],
            },
        ),
        "completions": ("/v1/completions", {"model": "x", "max_tokens": 4, "prompt": long_ids}),
    }
    observed = {}
    for name, (path, body) in cases.items():
        r = post(server, path, body)
        observed[name] = {
            "status": r.status_code,
            "content_type": r.headers.get("content-type"),
            "body": r.text,
        }
    # The streamed /generate answers 200 and puts the error in the event stream.
    r = post(
        server,
        "/generate",
        {"input_ids": long_ids, "stream": True, "sampling_params": {"max_new_tokens": 4}},
        stream=True,
    )
    _raw, events = sse_events(r)
    observed["generate_streamed"] = {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "events": events,
    }
    assert observed["generate_input_ids"]["status"] == 400
    assert "is longer than the model's context length" in observed["generate_input_ids"]["body"]
    assert observed["generate_streamed"]["status"] == 200
    assert observed == contract("errors", observed)
    # and the server still serves
    ok = post(server, "/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 2}})
    assert ok.status_code == 200


def log_shape(line: str) -> str:
    """A log line without its timestamp, with numbers (not inside names, signed: the CPU engine logs
    "mem usage=-0.00 GB" when memory was freed while loading) as N."""
    line = re.sub(r"^\[\d{4}-[^]]*\] ", "", line.strip())
    masked = re.sub(r"(?<![\w.])\d+(?:\.\d+)?", "N", line)
    return re.sub(r"(?<=[=:\s(\[,])-N\b", "N", masked)


def test_log_lines(server: Server) -> None:
    # The decode log line comes every --decode-log-interval (40) tokens: make one.
    r = post(
        server, "/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 48, "ignore_eos": True}}
    )
    assert r.status_code == 200
    deadline = time.monotonic() + 120  # the line is written soon after; the bound only ends a wait in vain
    while "Decode batch" not in server.log.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = server.log.read_text(errors="replace").splitlines()
    observed = {}
    for name, pattern in LOG_LINES.items():
        found = [ln for ln in lines if re.search(pattern, ln)]
        observed[name] = log_shape(found[0]) if found else None
    missing = [n for n, v in observed.items() if v is None]
    assert not missing, missing
    assert observed == contract("log_lines", observed)


@stops_shared_server
def test_sigterm_to_the_launcher_stops_the_process_tree(server: Server) -> None:
    stopped = server.started.sigterm()  # once for the session: the contract's API module reads it too
    names = sorted(set(stopped.names))
    assert server.pid in stopped.members
    assert len(stopped.members) >= 3, names  # launcher (tokenizer + HTTP), scheduler, detokenizer
    server.timings["stop_seconds"] = stopped.seconds
    assert stopped.gone, f"still running {STOP_WITHIN} s after SIGTERM: {group_members(server.pid)}"
    # The launcher's last words, timestamps and pids masked.
    said = [
        re.sub(r"\d{3,}", "N", re.sub(r"^\[[^]]*\] ", "", ln))
        for ln in server.log.read_text(errors="replace").splitlines()
        if re.search(
            r"SIGTERM received|Gracefully exiting|kill_process_tree|Shutting down|Finished server", ln
        )
    ]
    said = sorted(set(said))  # threads write them; the order is not fixed
    observed = {"process_names": names, "launcher_exit_code": stopped.exit_code, "log_says": said}
    assert observed == contract("shutdown", observed)
