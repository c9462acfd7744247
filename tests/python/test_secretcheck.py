"""sglbench.secretcheck: what counts as a secret on the controller, and the redaction of command lines."""

from __future__ import annotations

import pytest

from sglbench import secretcheck as sc


@pytest.mark.parametrize(
    "name",
    ["sglbench_api_key", "HF_TOKEN", "api-key", "MY_PASSWD", "db_password", "OPENAI_KEY", "x_secret", "AUTH"],
)
def test_secret_names(name: str) -> None:
    assert sc.secret_name(name)


@pytest.mark.parametrize(
    "name", ["tp", "max_total_tokens", "SGLANG_TOKENIZER_WORKERS", "key", "keep", "monkey", "sglbench_bench"]
)
def test_not_secret_names(name: str) -> None:
    assert not sc.secret_name(name)


def test_secret_values_whatever_the_name() -> None:
    assert sc.secret_value("hf_" + "a" * 30) and sc.secret_value("sk-" + "b" * 20)
    assert not sc.secret_value("/models/qwen3-8b") and not sc.secret_value(3)


def test_paths_and_redaction() -> None:
    data = {"tp": 1, "sglbench_bench": {"api_key": "x", "seed": 0}, "list": ["hf_" + "c" * 25]}
    assert sc.secret_paths(data) == ["sglbench_bench.api_key", "list[0]"]
    assert sc.redact(data) == {
        "tp": 1,
        "sglbench_bench": {"api_key": "<redacted>", "seed": 0},
        "list": ["<redacted>"],
    }
    assert sc.secret_paths({"sglbench_api_key": ""}) == []  # empty is not a secret


def test_redact_argv() -> None:
    argv = [
        "sglbench",
        "run",
        "-e",
        "sglbench_api_key=K",
        "--api-key",
        "K2",
        "--token=K3",
        "-e",
        '{"hf_token": "K4"}',
    ]
    out = sc.redact_argv(argv)
    assert out == [
        "sglbench", "run", "-e", "sglbench_api_key=<redacted>", "--api-key", "<redacted>",
        "--token=<redacted>", "-e", '{"hf_token": "<redacted>"}',
    ]  # fmt: skip
    assert not any(k in " ".join(out) for k in ("K2", "K3", "K4"))
