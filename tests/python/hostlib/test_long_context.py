"""Long-context prompts: exact seeded lengths, one-line errors, and the refusal of prompts that do not fit
the served context, before any load."""

from __future__ import annotations

import pytest

from sglbench.hostlib import loadgen, long_context, nullserver, prompts


def test_count_length_category_and_seed():
    got = prompts.resolve_prompt_source("long-context:3000x3", seed=1)
    assert [p.id for p in got] == ["long-3000-0", "long-3000-1", "long-3000-2"]
    assert {p.category for p in got} == {"long-context-3000"} and {p.kind for p in got} == {"input_ids"}
    ids = [p.token_ids() for p in got]
    assert [len(x) for x in ids] == [3000] * 3
    assert len({x[:8] for x in ids}) == 3  # no shared prefix between them
    assert ids == [p.token_ids() for p in prompts.resolve_prompt_source("long-context:3000x3", seed=1)]
    assert ids[0] != prompts.resolve_prompt_source("long-context:3000x3", seed=2)[0].token_ids()
    assert len(prompts.resolve_prompt_source("long-context:100")) == long_context.DEFAULT_COUNT
    # The record names the ids, it does not hold them.
    assert len(str(got[0].to_param())) < 200


@pytest.mark.parametrize(
    "spec",
    ["long-context:", "long-context:32kx2", "long-context:0", "long-context:10x0", "long-context:2000000"],
)
def test_bad_spec_is_a_one_line_error(spec):
    with pytest.raises(prompts.PromptError, match="long-context") as err:
        prompts.resolve_prompt_source(spec)
    assert "long-context:<tokens>[x<count>]" in str(err.value) and "\n" not in str(err.value)


def test_served_context_prefers_the_launch_flag():
    models = {"data": [{"id": "m", "max_model_len": 2048}]}
    assert long_context.served_context({"context_length": 1024}, models) == 1024
    assert long_context.served_context({"context_length": None}, models) == 2048  # SGLang 0.5.23's shape
    assert long_context.served_context({}, {"data": []}) is None
    assert long_context.served_context(None, None) is None


def test_check_fits_names_the_prompt_and_the_fix():
    ps = prompts.resolve_prompt_source("long-context:1000x2")
    long_context.check_fits(ps, None, 256)  # unknown context: nothing to say
    long_context.check_fits(ps, 1256, 256)
    with pytest.raises(
        ValueError, match=r"'long-1000-0' .* 1000 input \+ 256 output tokens, more than the server's"
    ) as err:
        long_context.check_fits(ps, 1255, 256)
    assert "at most 999 tokens" in str(err.value) and "\n" not in str(err.value)
    long_context.check_fits(
        [prompts.Prompt("t", "chat", text="x" * 10_000)], 10, 256
    )  # text: the server's to count


def test_the_load_generator_refuses_a_context_too_long_before_any_load(monkeypatch):
    info = nullserver.NullServerState.server_info
    monkeypatch.setattr(
        nullserver.NullServerState, "server_info", lambda self: {**info(self), "context_length": 512}
    )
    with nullserver.NullServerThread(nullserver.NullServerConfig()) as srv:
        spec = loadgen.BenchSpec(
            url=srv.url,
            prompts=prompts.resolve_prompt_source("long-context:1000x2"),
            points=[loadgen.LoadPoint(concurrency=1)],
            num_prompts=2,
            repeats=1,
        )
        with pytest.raises(loadgen.LoadgenError, match="more than the server's context length 512"):
            loadgen.run_campaign(spec)
        assert srv.state.requests == 0
        spec.prompts = prompts.resolve_prompt_source("long-context:200x2")
        assert loadgen.run_campaign(spec).points[0].summary["n_ok"] == 2
