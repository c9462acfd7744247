from __future__ import annotations

import subprocess
import sys

import pytest

from sglbench import cli


def test_every_subcommand_registers_and_top_level_help_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name, _module in cli.SUBCOMMANDS:
        assert name in out


def test_a_light_subcommand_does_not_import_pandas_or_matplotlib() -> None:
    code = (
        "import sys; from sglbench import cli\n"
        "try:\n    cli.main(['plan', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pandas', 'matplotlib', 'ansible_runner') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": "python"}
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
    assert "no-such-command" in capsys.readouterr().err
