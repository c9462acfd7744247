"""SpecBench / SPEED-Bench question files: first turns with their categories, one-line errors, identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglbench import resume
from sglbench.hostlib import prompts

QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post.", "Rewrite it."]},
    {"question_id": 111, "category": "math", "turns": ["What is 3 + 4?"]},
    {"category": "low_entropy", "turns": ["List the primes below 20."], "source": "speed-bench"},
    {"turns": ["No category here."]},
]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_first_turns_with_their_categories(tmp_path):
    path = _write(tmp_path / "question.jsonl", QUESTIONS)
    got = prompts.resolve_prompt_source(f"specbench:{path}")
    assert [p.id for p in got] == ["81", "111", "question:3", "question:4"]
    assert [p.category for p in got] == ["writing", "math", "low_entropy", "specbench"]
    assert [p.text for p in got] == [q["turns"][0] for q in QUESTIONS]


@pytest.mark.parametrize(
    "line, msg",
    [
        ('{"category": "math"}', "'turns' must be a list whose first entry is the prompt text"),
        ('{"turns": []}', "'turns' must be a list"),
        ('{"turns": [{"role": "user"}]}', "'turns' must be a list"),
        ('{"turns": ["q"], "category": 3}', "'category' must be a non-empty string"),
        ('"just text"', "expected a JSON object"),
        ("{oops", "not valid JSON"),
    ],
)
def test_bad_lines_are_one_line_errors(tmp_path, line, msg):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]) + "\n" + line + "\n")
    with pytest.raises(prompts.PromptError, match=msg) as err:
        prompts.resolve_prompt_source(f"specbench:{path}")
    assert f"{path}:2" in str(err.value) and "\n" not in str(err.value)


def test_bad_sources(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    for spec, msg in [
        ("specbench:", "use specbench:<path>"),
        (f"specbench:{tmp_path}/none.jsonl", "cannot read SpecBench file"),
        (f"specbench:{tmp_path}/empty.jsonl", "holds no questions"),
    ]:
        with pytest.raises(prompts.PromptError, match=msg):
            prompts.resolve_prompt_source(spec)


def test_identity_follows_the_file(tmp_path):
    path = _write(tmp_path / "question.jsonl", QUESTIONS)

    def identity() -> str:
        records = [p.to_param() for p in prompts.resolve_prompt_source(f"specbench:{path}")]
        return resume.attempt_identity({"config": "c", "prompts": records})["hash"]

    before = identity()
    _write(path, [dict(QUESTIONS[0], category="roleplay"), *QUESTIONS[1:]])
    assert identity() != before
