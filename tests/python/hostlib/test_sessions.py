"""Multi-turn sessions: the two sources (seeded generator, ShareGPT all turns), their records and identity,
grouping and planning on the host, and the load generator carrying each session's history."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from sglbench import resume
from sglbench.hostlib import loadgen, nullserver, prompts, sessions
from sglbench.hostlib.loadgen_api import RequestRecord

CONVS = [
    {
        "id": "a1",
        "conversations": [
            {"from": "human", "value": "Why is the sky blue?"},
            {"from": "gpt", "value": "Scattering."},
            {"from": "human", "value": "And sunsets?"},
            {"from": "gpt", "value": "Longer path."},
        ],
    },
    {"id": "a2", "conversations": [{"from": "human", "value": "only one turn"}]},
    {"conversation": [{"from": "gpt", "value": "Hello!"}, {"from": "user", "value": "Name three rivers."}]},
]


def _write(path: Path, records: list, jsonl: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records) if jsonl else json.dumps(records)
    path.write_text(text)
    return path


# -- sources -------------------------------------------------------------------------------------------------
def test_multi_turn_sessions_carry_their_system_prompt_in_turn_zero_only():
    got = prompts.resolve_prompt_source("multi-turn:3x4:40:8", seed=1)
    assert len(got) == 12 and {p.category for p in got} == {"multi-turn"}
    assert [(p.id, p.session, p.turn) for p in got[:5]] == [
        ("mt-s0-t0", "mt-s0", 0),
        ("mt-s0-t1", "mt-s0", 1),
        ("mt-s0-t2", "mt-s0", 2),
        ("mt-s0-t3", "mt-s0", 3),
        ("mt-s1-t0", "mt-s1", 0),
    ]
    first = {p.session: p.text for p in got if p.turn == 0}
    systems = {s: text.split("\n\n")[0] for s, text in first.items()}
    assert len(set(systems.values())) == 3  # each session its own system prompt: no shared prefix
    assert all(len(s.split()) == 40 + 3 for s in systems.values())  # "System prompt N." + 40 words
    later = [p for p in got if p.turn]
    assert all("\n\n" not in p.text and p.text.startswith(f"Turn {p.turn}: ") for p in later)
    assert all(len(p.text.split()) == 8 + 2 for p in later)
    assert len({p.text for p in got}) == 12


def test_multi_turn_is_seeded():
    a = [p.text for p in prompts.resolve_prompt_source("multi-turn:2x3", seed=5)]
    assert a == [p.text for p in prompts.resolve_prompt_source("multi-turn:2x3", seed=5)]
    assert a != [p.text for p in prompts.resolve_prompt_source("multi-turn:2x3", seed=6)]
    assert sessions.parse_multi_turn("multi-turn:2x3") == (2, 3, *sessions.MULTI_TURN_DEFAULTS)


@pytest.mark.parametrize(
    "spec",
    [
        "multi-turn:4",
        "multi-turn:0x3",
        "multi-turn:2x2:10",
        "multi-turn:axb",
        "multi-turn:1000x1000",
        "multi-turn:2x2:300000:1",
        "multi-turn:",
    ],
)
def test_bad_multi_turn_spec_is_one_line_with_the_form(spec):
    with pytest.raises(prompts.PromptError, match="multi-turn") as err:
        prompts.resolve_prompt_source(spec)
    assert "\n" not in str(err.value)
    assert spec in str(err.value)


@pytest.mark.parametrize("jsonl", [False, True])
def test_sharegpt_turns_are_the_user_turns_of_each_conversation(tmp_path, jsonl):
    path = _write(tmp_path / ("s.jsonl" if jsonl else "s.json"), CONVS, jsonl)
    got = prompts.resolve_prompt_source(f"sharegpt-turns:{path}")
    assert [(p.id, p.category, p.session, p.turn, p.text) for p in got] == [
        ("a1:t0", "sharegpt-turns", "a1", 0, "Why is the sky blue?"),
        ("a1:t1", "sharegpt-turns", "a1", 1, "And sunsets?"),
        ("s:2:t0", "sharegpt-turns", "s:2", 0, "Name three rivers."),
    ]  # the file's answers are never sent; a1's second record has one turn and is skipped


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"conversations": "no"}]', "'conversations' list"),
        (
            '[{"conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "y"}]}]',
            r"conversations\[0\] needs",
        ),
        (
            '[{"conversations": [{"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}]}]',
            "no conversation with a user turn",
        ),
        (
            '[{"id": 1, "conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},'
            ' {"id": 1, "conversations": [{"from": "human", "value": "c"}, {"from": "gpt", "value": "d"}]}]',
            "id '1' is used by an earlier conversation",
        ),
    ],
)
def test_sharegpt_turns_errors_are_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(prompts.PromptError, match=message) as err:
        prompts.resolve_prompt_source(f"sharegpt-turns:{path}")
    assert "\n" not in str(err.value)
    for spec, msg in (
        (f"sharegpt-turns:{tmp_path / 'missing.json'}", "cannot read ShareGPT file"),
        ("sharegpt-turns:", "give a path"),
    ):
        with pytest.raises(prompts.PromptError, match=msg) as err:
            prompts.resolve_prompt_source(spec)
        assert "\n" not in str(err.value)


def test_identity_hash_follows_the_session_sources(tmp_path):
    path = _write(tmp_path / "s.json", CONVS)

    def identity(spec: str, seed: int = 0) -> str:
        records = [p.to_param() for p in prompts.resolve_prompt_source(spec, seed=seed)]
        parts = {"config": "c", "prompt_sets": [spec], "prompts": records, "load": {"seed": seed}}
        return resume.attempt_identity(parts)["hash"]

    before = identity(f"sharegpt-turns:{path}")
    assert identity(f"sharegpt-turns:{path}") == before
    changed = json.loads(json.dumps(CONVS))
    changed[0]["conversations"][2]["value"] = "And at noon?"  # a later turn only
    _write(path, changed)
    assert identity(f"sharegpt-turns:{path}") != before  # same path, other content: another attempt
    # The first-turn source and the all-turns source of one file are different attempts.
    first = [p.to_param() for p in prompts.resolve_prompt_source(f"sharegpt:{path}")]
    turns = [p.to_param() for p in prompts.resolve_prompt_source(f"sharegpt-turns:{path}")]
    assert resume.sha256_of(first) != resume.sha256_of(turns)
    assert identity("multi-turn:2x3", seed=1) != identity("multi-turn:2x3", seed=2)
    assert identity("multi-turn:2x3:10:5") != identity("multi-turn:2x3:10:6")
    assert identity("multi-turn:2x3") != identity("multi-turn:3x2")
    assert identity("multi-turn:2x3") == identity("multi-turn:2x3")


def test_session_records_round_trip_and_bad_fields_are_one_line():
    for p in prompts.resolve_prompt_source("multi-turn:2x2:5:5", seed=0):
        back = prompts.parse_prompt_record(p.to_param(), "x", "d")
        assert back == p
    bad = [
        ({"prompt": "a", "turn": 0}, "'session' must be a non-empty string"),
        ({"prompt": "a", "session": "s"}, "'turn' must be an integer >= 0"),
        ({"prompt": "a", "session": "s", "turn": -1}, "'turn' must be an integer >= 0"),
        ({"prompt": "a", "session": "s", "turn": True}, "'turn' must be an integer >= 0"),
        ({"input_ids": [1, 2], "session": "s", "turn": 0}, "a session turn is text"),
    ]
    for obj, msg in bad:
        with pytest.raises(prompts.PromptError, match=msg) as err:
            prompts.parse_prompt_record(obj, "f.jsonl:3", "d")
        assert str(err.value).startswith("f.jsonl:3: ") and "\n" not in str(err.value)


def test_a_jsonl_file_can_hold_sessions(tmp_path):
    path = tmp_path / "mine.jsonl"
    lines = [{"prompt": "hi", "session": "x", "turn": 1}, {"prompt": "first", "session": "x", "turn": 0}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = sessions.group_sessions(prompts.resolve_prompt_source(str(path)))
    assert got is not None and [(s.id, [t.text for t in s.turns]) for s in got] == [("x", ["first", "hi"])]


# -- grouping and planning -----------------------------------------------------------------------------------
def test_grouping_refuses_mixed_sets_and_gaps():
    plain = prompts.Prompt("p", "chat", text="hi")
    turn = prompts.Prompt("t", "multi-turn", text="hi", session="s", turn=0)
    assert sessions.group_sessions([plain]) is None
    with pytest.raises(prompts.PromptError, match="list a multi-turn source alone"):
        sessions.group_sessions([plain, turn])
    gap = prompts.Prompt("t2", "multi-turn", text="x", session="s", turn=2)
    with pytest.raises(prompts.PromptError, match=r"session 's' has turns \[0, 2\]"):
        sessions.group_sessions([turn, gap])
    with pytest.raises(prompts.PromptError, match=r"has turns \[0, 0\]"):
        sessions.group_sessions([turn, turn])


def test_spec_validation_refuses_sessions_with_several_client_processes():
    plist = prompts.resolve_prompt_source("multi-turn:4x2:5:5")
    spec = loadgen.BenchSpec(
        url="http://127.0.0.1:1", prompts=plist, points=[loadgen.LoadPoint(concurrency=4)], procs=2
    )
    with pytest.raises(loadgen.LoadgenError, match="set procs to 1") as err:
        spec.validate()
    assert "\n" not in str(err.value)
    spec.procs = 1
    spec.validate()


def test_plan_takes_whole_sessions_in_a_seeded_order_up_to_the_request_count():
    plist = prompts.resolve_prompt_source("multi-turn:5x3:5:5")
    groups = sessions.group_sessions(plist)
    assert groups is not None

    def order(budget: int, seed: int) -> list[str]:
        plan = sessions.SessionPlan(groups, budget, seed)
        out = []
        while (s := plan.next()) is not None:
            out.append(s.id)
        return out

    assert order(9, 0) == order(9, 0) and len(order(9, 0)) == 3  # 3 sessions of 3 turns
    assert len(order(10, 0)) == 4  # whole sessions: the fourth ends two turns past the count
    assert order(15, 0) != order(15, 1) and sorted(order(15, 0)) == sorted(g.id for g in groups)
    assert order(30, 0)[:5] != order(30, 0)[5:]  # every pass over the sessions is a new shuffle


def test_turn_table_counts_ttft_and_cached_share_per_turn():
    def rec(
        turn: int, ttft: float, prompt: int, cached: int | None, error: str | None = None
    ) -> RequestRecord:
        r = sessions.TurnRecord(0, f"t{turn}", "multi-turn", session="s", turn=turn)
        r.sent_s, r.chunk_t, r.chunk_tokens, r.end_s = 1.0, [1.0 + ttft], [1], 2.0
        r.prompt_tokens, r.cached_tokens, r.error = prompt, cached, error
        return r

    table = sessions.turn_table(
        [
            rec(0, 0.5, 100, 0),
            rec(0, 0.3, 100, 0),
            rec(1, 0.1, 150, 90),
            rec(1, 0.2, 150, 120),
            rec(1, 0.0, 150, 150, error="boom"),
            RequestRecord(9, "plain", "chat"),
        ]
    )
    assert [(t["turn"], t["n_requests"], t["n_ok"]) for t in table] == [(0, 2, 2), (1, 3, 2)]
    assert table[0]["ttft_ms"]["p50"] == pytest.approx(400.0)
    assert table[1]["ttft_ms"]["mean"] == pytest.approx(150.0)
    assert (table[0]["cached_tokens_mean"], table[0]["cached_fraction"]) == (0.0, 0.0)
    assert table[1]["cached_tokens_mean"] == pytest.approx(105.0)
    assert table[1]["cached_fraction"] == pytest.approx(210 / 300)


def test_response_text_per_api():
    rec = RequestRecord(0, "p", "c")
    rec.completion_tokens = 2
    native = sessions.ResponseText("native")
    native.feed([b'{"text":" a","output_ids":[5],"meta_info":{"completion_tokens":1}}'])
    native.feed([b'{"text":" a b","output_ids":[5,6],"meta_info":{"completion_tokens":2}}', b"[DONE]"])
    assert native.value(rec) == " a b"
    incremental = sessions.ResponseText("native")
    incremental.feed([b'{"text":" b","output_ids":[6],"meta_info":{"completion_tokens":2}}'])
    with pytest.raises(ValueError, match="--incremental-streaming-output"):
        incremental.value(rec)
    chat = sessions.ResponseText("openai-chat")
    chat.feed(
        [
            b'{"choices":[{"delta":{"role":"assistant","content":""}}]}',
            b'{"choices":[{"delta":{"reasoning_content":"hm ","content":"Hi"}}]}',
        ]
    )
    chat.feed(
        [
            b'{"choices":[{"delta":{"content":" there"},"finish_reason":"length"}]}',
            b'{"choices":[],"usage":{"completion_tokens":2}}',
            b"[DONE]",
        ]
    )
    assert chat.value(rec) == "hm Hi there"
    completions = sessions.ResponseText("openai")
    completions.feed([b'{"choices":[{"text":"x"}]}', b'{"choices":[{"text":"y"}]}'])
    assert completions.value(rec) == "xy"


# -- the load generator --------------------------------------------------------------------------------------
@pytest.mark.parametrize("api", ["native", "openai", "openai-chat"])
def test_each_turn_is_sent_with_the_history_and_the_servers_answers(api, monkeypatch):
    bodies: dict[str, dict] = {}
    build = loadgen.api_mod.build_body

    def spy(api_name, prompt, sampling, model):
        body = build(api_name, prompt, sampling, model)
        bodies[prompt.id] = json.loads(body)
        return body

    monkeypatch.setattr(loadgen.api_mod, "build_body", spy)
    answers: dict[str, str] = {}
    real_value = sessions.ResponseText.value

    def keep(self, rec):
        answers[rec.prompt_id] = real_value(self, rec)
        return answers[rec.prompt_id]

    monkeypatch.setattr(sessions.ResponseText, "value", keep)
    plist = prompts.resolve_prompt_source("multi-turn:3x3:12:4", seed=2)
    text = {p.id: p.text for p in plist}
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=2)) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            api=api,
            prompts=plist,
            points=[loadgen.LoadPoint(concurrency=2)],
            sampling=loadgen.SamplingSpec(max_new_tokens=5, ignore_eos=True),
            num_prompts=9,
            repeats=1,
            warmup=2,
            seed=4,
        )
        result = loadgen.run_campaign(spec)
    pr = result.points[0]
    assert (pr.summary["n_ok"], pr.summary["n_err"]) == (9, 0)
    recs = sorted(pr.records, key=lambda r: r.idx)
    for s in range(3):
        mine = [r for r in recs if r.session == f"mt-s{s}"]
        assert [r.turn for r in mine] == [0, 1, 2]
        for a, b in itertools.pairwise(mine):  # turn k is sent only after turn k-1's last byte
            assert b.sent_s >= a.end_s and b.prompt_tokens > a.prompt_tokens
    for s in range(3):
        history = []
        for t in range(3):
            pid = f"mt-s{s}-t{t}"
            history.append({"role": "user", "content": text[pid]})
            if api == "openai-chat":
                assert bodies[pid]["messages"] == history
            else:
                key = "text" if api == "native" else "prompt"
                assert bodies[pid][key] == "\n\n".join(m["content"] for m in history)
            assert answers[pid]  # the server's answer, fed to the next turn
            history.append({"role": "assistant", "content": answers[pid]})
    assert [t["turn"] for t in pr.summary["turns"]] == [0, 1, 2]
    assert all(t["n_ok"] == 3 for t in pr.summary["turns"])
    rows = loadgen.record_rows(result)
    assert sorted((r["session"], r["turn"]) for r in rows) == sorted(
        (f"mt-s{s}", t) for s in range(3) for t in range(3)
    )


def test_sessions_follow_a_rate_schedule_and_a_failed_turn_ends_its_session(monkeypatch):
    plist = prompts.resolve_prompt_source("multi-turn:4x3:6:3", seed=0)
    real_value = sessions.ResponseText.value

    def fail_second_turn(self, rec):
        if rec.prompt_id.endswith("-t1"):
            raise ValueError("no answer")
        return real_value(self, rec)

    monkeypatch.setattr(sessions.ResponseText, "value", fail_second_turn)
    with nullserver.NullServerThread(nullserver.NullServerConfig(chunk_tokens=1)) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=plist,
            points=[loadgen.LoadPoint(concurrency=2, request_rate=50.0)],
            sampling=loadgen.SamplingSpec(max_new_tokens=3, ignore_eos=True),
            num_prompts=12,
            repeats=1,
            warmup=0,
        )
        pr = loadgen.run_campaign(spec).points[0]
    assert sorted(r.turn for r in pr.records) == [0, 0, 0, 0, 1, 1, 1, 1]  # turn 2 never sent
    assert all(r.error == "no answer" for r in pr.records if r.turn == 1)
    schedule = loadgen.poisson_schedule(50.0, 12, spec.seed)
    firsts = sorted(r.scheduled_s for r in pr.records if r.turn == 0)
    assert firsts == pytest.approx(schedule[:4])  # sessions start on the Poisson schedule
    assert pr.summary["n_err"] == 4 and pr.summary["valid"] is False


def test_a_rate_point_judges_the_rate_of_session_starts():
    plist = prompts.resolve_prompt_source("multi-turn:10x3:6:3", seed=0)
    with nullserver.NullServerThread(nullserver.NullServerConfig(ttft_s=0.05)) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=plist,
            points=[loadgen.LoadPoint(request_rate=40.0)],
            sampling=loadgen.SamplingSpec(max_new_tokens=2, ignore_eos=True),
            num_prompts=30,
            repeats=1,
            warmup=0,
        )
        pr = loadgen.run_campaign(spec).points[0]
    assert pr.summary["n_ok"] == 30
    starts = sorted(r.sent_s for r in pr.records if r.turn == 0)
    every = sorted(r.sent_s for r in pr.records)
    achieved = pr.summary["client"]["achieved_rate"]
    assert achieved == pytest.approx(9 / (starts[-1] - starts[0]))  # the sessions the schedule started
    assert achieved != pytest.approx(29 / (every[-1] - every[0]), rel=0.05)  # not every turn's send


def test_a_duration_bound_starts_no_session_after_the_deadline_and_ends_the_started_ones():
    plist = prompts.resolve_prompt_source("multi-turn:50x3:6:3", seed=0)
    with nullserver.NullServerThread(nullserver.NullServerConfig(ttft_s=0.04)) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=plist,
            points=[loadgen.LoadPoint(concurrency=2)],
            sampling=loadgen.SamplingSpec(max_new_tokens=2, ignore_eos=True),
            num_prompts=10**9,
            duration_s=0.3,
            repeats=1,
            warmup=0,
        )
        pr = loadgen.run_campaign(spec).points[0]
    by_session: dict[str, list[int]] = {}
    for r in pr.records:
        by_session.setdefault(str(r.session), []).append(int(r.turn or 0))
    assert 2 <= len(by_session) < 50
    assert all(sorted(turns) == [0, 1, 2] for turns in by_session.values())  # started sessions finish
    assert all(r.sent_s < 0.3 for r in pr.records if r.turn == 0)
    assert max(r.end_s for r in pr.records) > 0.3  # the last turns ran past the deadline
