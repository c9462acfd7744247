"""Request bodies and stream decoding for the native and OpenAI routes (no network)."""

from __future__ import annotations

import json

import pytest

from sglbench.hostlib import loadgen_api as api
from sglbench.hostlib.prompts import Prompt

TEXT = Prompt(id="t", category="chat", text="hello")
IDS = Prompt(id="i", category="synthetic", input_ids=(5, 6, 7))


def test_native_body_is_greedy_fixed_length_stream():
    body = json.loads(
        api.build_body("native", TEXT, api.SamplingSpec(max_new_tokens=32, ignore_eos=True), None)
    )
    assert body == {
        "text": "hello",
        "stream": True,
        "sampling_params": {"max_new_tokens": 32, "temperature": 0.0, "ignore_eos": True},
    }
    body = json.loads(api.build_body("native", IDS, api.SamplingSpec(), None))
    assert body["input_ids"] == [5, 6, 7] and "text" not in body
    assert "ignore_eos" not in body["sampling_params"]


def test_openai_bodies_ask_for_usage_on_every_chunk():
    c = json.loads(api.build_body("openai", IDS, api.SamplingSpec(max_new_tokens=8, ignore_eos=True), "m"))
    assert c["prompt"] == [5, 6, 7] and c["max_tokens"] == 8 and c["model"] == "m" and c["ignore_eos"] is True
    assert c["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    chat = json.loads(api.build_body("openai-chat", TEXT, api.SamplingSpec(), None))
    assert chat["messages"] == [{"role": "user", "content": "hello"}] and chat["model"] == "default"
    with pytest.raises(ValueError, match="unknown api"):
        api.build_body("grpc", TEXT, api.SamplingSpec(), None)


@pytest.mark.parametrize(
    "obj",
    [
        {"text": "a", "meta_info": {"completion_tokens": 17, "prompt_tokens": 3}},
        {"text": '"completion_tokens": 99', "meta_info": {"completion_tokens": 4}},
        {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 123}},
    ],
)
def test_fast_completion_tokens_agrees_with_json(obj):
    for dumps in (lambda o: json.dumps(o), lambda o: json.dumps(o, separators=(",", ":"))):
        payload = dumps(obj).encode()
        expect = obj.get("meta_info", obj.get("usage"))["completion_tokens"]
        assert api.fast_completion_tokens(payload) == expect


def test_fast_completion_tokens_absent_or_null():
    assert api.fast_completion_tokens(b'{"usage":null}') is None
    assert api.fast_completion_tokens(b'{"usage":{"completion_tokens":null}}') is None


def native_event(n: int, final: bool = False, spec: bool = False) -> bytes:
    meta = {"completion_tokens": n, "prompt_tokens": 9, "finish_reason": None, "cached_tokens": 2}
    if final:
        meta["finish_reason"] = {"type": "length", "length": n}
        if spec:
            meta.update(
                spec_verify_ct=3,
                spec_accept_length=n / 3,
                spec_accept_rate=0.5,
                spec_accept_token_num=n - 3,
                spec_draft_token_num=9,
            )
    return json.dumps({"text": "x" * n, "output_ids": list(range(n)), "meta_info": meta}).encode()


def test_native_decoder_records_cumulative_counts_and_final_meta():
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", rec)
    dec.on_event([native_event(4), native_event(8)], 1.0)
    dec.on_event([native_event(9, final=True, spec=True), b"[DONE]"], 2.0)
    rec.http_status = 200
    dec.finish()
    assert rec.chunk_t == [1.0, 1.0, 2.0] and rec.chunk_tokens == [4, 8, 9]
    assert (rec.completion_tokens, rec.prompt_tokens, rec.cached_tokens) == (9, 9, 2)
    assert rec.token_source == "server" and rec.finish_reason == "length"
    assert rec.spec_verify_ct == 3 and rec.spec_accept_length == pytest.approx(3.0)
    assert rec.spec_accept_token_num == 6 and rec.spec_draft_token_num == 9
    assert dec.done and rec.error is None


def test_native_error_event_and_abort_become_errors():
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", rec)
    dec.on_event([b'{"error":{"message":"out of memory"}}'], 1.0)
    assert rec.error is not None and "out of memory" in rec.error

    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", rec)
    aborted = {
        "text": "",
        "meta_info": {"completion_tokens": 1, "finish_reason": {"type": "abort", "message": "client gone"}},
    }
    dec.on_event([json.dumps(aborted).encode()], 1.0)
    rec.http_status = 200
    dec.finish()
    assert rec.error is not None and "abort" in rec.error


def openai_chunk(
    text: str, n: int | None, finish: str | None = None, chat: bool = False, spaced: bool = False
) -> bytes:
    choice = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    usage = None if n is None else {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}
    seps = (", ", ": ") if spaced else (",", ":")
    return json.dumps({"choices": [choice], "usage": usage}, separators=seps).encode()


USAGE_ONLY = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}'


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("spaced", [False, True])
def test_openai_decoder_with_continuous_usage(chat, spaced):
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("openai-chat" if chat else "openai", rec)
    dec.on_event(
        [openai_chunk("ab", 2, chat=chat, spaced=spaced), openai_chunk("cd", 4, chat=chat, spaced=spaced)],
        1.0,
    )
    dec.on_event([openai_chunk("ef", 6, "length", chat=chat, spaced=spaced), USAGE_ONLY, b"[DONE]"], 2.0)
    rec.http_status = 200
    dec.finish()
    assert rec.chunk_tokens == [2, 4, 6] and rec.chunk_t == [1.0, 1.0, 2.0]
    assert rec.chunk_token_source == "server" and rec.token_source == "server"
    assert (rec.completion_tokens, rec.prompt_tokens, rec.finish_reason) == (6, 5, "length")


def test_openai_decoder_without_usage_counts_chunks_and_labels_the_estimate():
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("openai", rec)
    dec.on_event([openai_chunk("a", None), openai_chunk("", None), openai_chunk("b", None, "stop")], 1.0)
    rec.http_status = 200
    dec.finish()
    assert rec.chunk_tokens == [1, 2]
    assert rec.chunk_token_source == "chunk_count_estimate"
    assert rec.token_source == "client_estimate" and rec.completion_tokens == 2
    assert rec.finish_reason == "stop"


def test_openai_final_usage_overrides_the_chunk_estimate():
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("openai", rec)
    dec.on_event([openai_chunk("abc", None), openai_chunk("d", None, "length"), USAGE_ONLY], 1.0)
    rec.http_status = 200
    dec.finish()
    assert rec.completion_tokens == 6 and rec.token_source == "server"
    assert rec.chunk_token_source == "chunk_count_estimate"


def test_empty_stream_is_an_error():
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("openai", rec)
    dec.on_event([b"[DONE]"], 1.0)
    rec.http_status = 200
    dec.finish()
    assert rec.error == "stream ended without any token-bearing event"


def test_error_from_response_hints():
    assert "api-key-file" in api.error_from_response(401, b'{"error":{"message":"Unauthorized"}}')
    assert "--api" in api.error_from_response(404, b"not found")
    assert api.error_from_response(500, b"boom").startswith("HTTP 500")


def test_native_decoder_keeps_whole_output_ids_only_when_asked():
    events = [native_event(4), native_event(9, final=True), b"[DONE]"]
    kept = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", kept, keep_output_ids=True)
    dec.on_event(events, 1.0)
    dec.finish()
    assert kept.output_ids == list(range(9))
    plain = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", plain)
    dec.on_event(events, 1.0)
    dec.finish()
    assert plain.output_ids is None


def test_incremental_output_ids_are_not_taken_for_the_whole_output():
    # --incremental-streaming-output: the final event carries only the last increment.
    final = json.loads(native_event(9, final=True))
    final["output_ids"] = [7, 8]
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", rec, keep_output_ids=True)
    dec.on_event([native_event(7), json.dumps(final).encode()], 1.0)
    dec.finish()
    assert rec.completion_tokens == 9 and rec.output_ids is None
    assert api.complete_output_ids([1, True], 2) is None
    assert api.complete_output_ids([1, 2], 2) == [1, 2]


@pytest.mark.parametrize("version", ["0.5.10", "0.5.11", "0.5.18", "0.5.23"])
def test_every_release_spelling_of_the_spec_counters_reads_the_same(version):
    from sglbench.hostlib import sglang_facts

    values = {"spec_accept_token_num": 5, "spec_draft_token_num": 9, "spec_accept_histogram": [1, 0, 2]}
    meta = {"completion_tokens": 8, "finish_reason": {"type": "length"}, "spec_verify_ct": 3}
    for field_name, keys in sglang_facts.spec_meta_keys(version).items():
        meta.update(dict.fromkeys(keys, values[field_name]))
    rec = api.RequestRecord(idx=0, prompt_id="p", category="c")
    dec = api.StreamDecoder("native", rec)
    dec.on_event([json.dumps({"output_ids": list(range(8)), "meta_info": meta}).encode()], 1.0)
    dec.finish()
    assert (rec.spec_accept_token_num, rec.spec_draft_token_num) == (5, 9)
    assert rec.spec_accept_histogram == [1, 0, 2]


def test_spec_meta_spelling_per_release():
    from sglbench.hostlib import sglang_facts

    assert sglang_facts.spec_meta_keys("0.5.10")["spec_accept_histogram"] == ("spec_accept_histogram",)
    assert sglang_facts.spec_meta_keys("0.5.11")["spec_accept_token_num"] == ("spec_accepted_drafts",)
    both = sglang_facts.spec_meta_keys("0.5.20")["spec_accept_histogram"]
    assert both == ("spec_correct_drafts_histogram", "spec_accept_histogram")
    assert sglang_facts.spec_meta_keys("0.5.23+ddtree")["spec_draft_token_num"] == (
        "spec_num_proposed_drafts",
    )
