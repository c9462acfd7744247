"""Property-based fuzz of the ``sglbench`` command line: hostile arguments and damaged results.

Every subcommand is driven in-process through :func:`sglbench.cli.main` with generated arguments, and the
reading commands over results directories damaged at random (truncated, binary or wrong-schema JSON,
missing files, a duplicated run). The property: no exception escapes (no traceback), the exit code is 0, 1
or 2, and an exit 2 prints exactly one line, ``sglbench <command>: error: ...``, naming the input.

Kept fast for ``make test``: few examples per property, no network beyond a closed loopback
port, no server start (``calibrate`` and ``run``/``schedule`` only get arguments that fail before they do
anything). The default profile is derandomized (the same examples every run, so CI is not flaky);
``SGLBENCH_FUZZ_PROFILE=explore`` draws new random examples, more of them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import recordfactory as rf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglbench import cli

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,  # how long an example takes is the machine's: the property is its outcome
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "explore",
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("SGLBENCH_FUZZ_PROFILE", "ci"))

CLOSED_URL = "http://127.0.0.1:9"  # loopback, nothing listens: every connection is refused at once
MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "models"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``sglbench argv`` in-process: (exit code, stdout, stderr). Any exception but SystemExit propagates,
    which fails the property (it would be a traceback for the user)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as exc:  # argparse: bad arguments, --help
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def check_outcome(argv: list[str], rc: int, out: str, err: str, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    assert rc in allowed, (argv, rc, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, (argv, err[-3000:])
    if rc == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, (argv, lines)
        assert lines[0].startswith("sglbench") and "error: " in lines[0], (argv, lines)


# -- value strategies -------------------------------------------------------------------------------------
SPECIAL_NUMBERS = ["nan", "inf", "-inf", "0", "-0", "-1", "1e308", "1e-308", "99999999999", "-99999999999"]
numbers = st.one_of(
    st.sampled_from(SPECIAL_NUMBERS),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
junk = st.one_of(
    st.sampled_from(["", " ", "abc", "1,2,,3", "1;2", "\x00", "é", "--", "-", "1e", "0x10", "١٢"]),
    st.text(min_size=0, max_size=12),
)
values = st.one_of(numbers, junk)


def flag_pairs(
    flags: list[str], value_strategy: st.SearchStrategy[str] = values
) -> st.SearchStrategy[list[str]]:
    """A few ``--flag=value`` words (the ``=`` form, so values starting with '-' stay values)."""
    pair = st.tuples(st.sampled_from(flags), value_strategy).map(lambda fv: f"{fv[0]}={fv[1]}")
    return st.lists(pair, min_size=0, max_size=4)


BENCH_VALUE_FLAGS = [
    "--concurrency",
    "--num-prompts",
    "--duration",
    "--max-new-tokens",
    "--warmup",
    "--seed",
    "--procs",
    "--max-concurrency",
    "--request-rate",
    "--repeats",
    "--temperature",
    "--slo-ttft-ms",
    "--slo-tpot-ms",
    "--slo-e2e-ms",
    "--request-timeout",
    "--max-error-rate",
    "--api",
    "--model",
]
PROMPT_SOURCES = st.one_of(
    st.sampled_from(
        ["math", "chat,code", "mixed", "nosuch", "synthetic:", "synthetic:x", "/nonexistent.jsonl"]
    ),
    st.integers(min_value=-5, max_value=10**15).map(lambda n: f"synthetic:{n}"),
)


# -- bench / calibrate ------------------------------------------------------------------------------------
@given(
    pairs=flag_pairs(BENCH_VALUE_FLAGS),
    source=PROMPT_SOURCES,
    flags=st.lists(
        st.sampled_from(["--ignore-eos", "--no-flush-cache", "--simulated", "--overwrite"]), max_size=2
    ),
    url=st.sampled_from(
        [CLOSED_URL, "127.0.0.1:9", "http://", "ftp://x", "http://[::1", "http://127.0.0.1:0"]
    ),
)
def test_bench_arguments_never_trace_back(
    tmp_path: Path, pairs: list[str], source: str, flags: list[str], url: str
):
    """Whatever the arguments, `bench` against a closed port ends in a usage error (2) or a connection
    error (1) with one line, and never leaves a half-written result."""
    out = Path(tempfile.mkdtemp(dir=tmp_path)) / "o"
    argv = ["bench", f"--url={url}", f"--prompts={source}", *pairs, *flags, "--out", str(out)]
    rc, stdout, err = run_cli(argv)
    check_outcome(argv, rc, stdout, err, allowed=(1, 2))
    assert not (out / "summary.json").exists()


CALIBRATE_BAD = [
    ("--gap-ms", ["nan", "inf", "-1", "1e9"]),
    ("--ttft-ms", ["nan", "inf", "-0.5", "1e300"]),
    ("--duration", ["nan", "inf", "0", "-3"]),
    ("--server-procs", ["0", "-1", "100000", "x"]),
    ("--chunk-tokens", ["0", "-2", "1000000000", "1.5"]),
    ("--max-new-tokens", ["0", "1000000000000", "x"]),
    ("--concurrency", ["0", "1,0", "1000000", "a"]),
    ("--procs", ["0", "65", "-1"]),
    ("--warmup", ["-1", "1000000000"]),
    ("--num-prompts", ["0", "-5"]),
]


@given(
    bad=st.sampled_from(CALIBRATE_BAD).flatmap(
        lambda fv: st.sampled_from(fv[1]).map(lambda v: f"{fv[0]}={v}")
    ),
    others=flag_pairs(
        ["--seed", "--api", "--max-new-tokens", "--warmup"], st.sampled_from(["1", "2", "native"])
    ),
)
def test_calibrate_argument_errors_fail_before_any_server_starts(bad: str, others: list[str]):
    argv = ["calibrate", *others, bad]  # the bad value last: it wins over a valid one for the same flag
    rc, out, err = run_cli(argv)
    check_outcome(argv, rc, out, err, allowed=(2,))


# -- plan -------------------------------------------------------------------------------------------------
PLAN_LAUNCH = st.lists(
    st.one_of(
        st.sampled_from(
            [
                ["--tp-size", "1"],
                ["--tp-size", "0"],
                ["--context-length", "4096"],
                ["--mem-fraction-static", "0.8"],
                ["--max-running-requests", "8"],
                ["--speculative-algorithm", "EAGLE"],
                ["--kv-cache-dtype", "fp8_e4m3"],
                ["--no-such-flag"],
            ]
        ),
        st.tuples(
            st.sampled_from(
                ["--context-length", "--mem-fraction-static", "--max-running-requests", "--page-size"]
            ),
            values,
        ).map(lambda t: [f"{t[0]}={t[1]}"]),
    ),
    max_size=3,
).map(lambda groups: [w for g in groups for w in g])


@given(
    gib=flag_pairs(["--gpu-mem-gib", "--free-gib", "--weights-gib", "--draft-weights-gib"], numbers),
    gpu=st.sampled_from([[], ["--gpu", "H100"], ["--gpu", "Voodoo"], ["--gpu", "RTX PRO 6000"]]),
    extra=st.lists(
        st.sampled_from(
            ["--json", "--accounting=A", "--accounting=Z", "--sglang-version=0.5.2", "--sglang-version=x"]
        ),
        max_size=2,
    ),
    model=st.sampled_from(
        [str(MODELS / "qwen3-8b"), str(MODELS / "qwen3.6-27b"), "/nonexistent", "", "org/x"]
    ),
    launch=PLAN_LAUNCH,
)
def test_plan_arguments_never_trace_back(gib, gpu, extra, model, launch):
    argv = ["plan", *gpu, *gib, *extra, "--", "--model-path", model, *launch]
    rc, out, err = run_cli(argv)
    check_outcome(argv, rc, out, err)
    if rc in (0, 1) and "--json" in extra:
        json.loads(out, parse_constant=lambda c: pytest.fail(f"{argv}: non-standard JSON constant {c}"))


# -- run / schedule / prune: argument errors only (no playbook, no systemd) ---------------------------------
COMMANDS = {name for name, _ in cli.SUBCOMMANDS}


@given(
    argv=st.one_of(
        st.sampled_from(
            ["--policy=bogus", "--policy=", "--wait=soon", "--wait=", "--no-such-option", "-e"]
        ).map(lambda a: ["run", a]),
        st.sampled_from(["--keep=x", "--keep=1.5", "--wait=never", "--keep-days=0.5", "--keep-days="]).map(
            lambda a: ["schedule", a]
        ),
        st.sampled_from(["--keep=x", "--keep-days=soon", "--no-such-option"]).map(lambda a: ["prune", a]),
        st.tuples(st.sampled_from(sorted(COMMANDS - {"run", "schedule"})), st.just("--no-such-option")).map(
            list
        ),
        junk.filter(lambda c: c not in COMMANDS and c.strip() not in ("-h", "--help")).map(lambda c: [c]),
    )
)
def test_argument_errors_of_every_command_are_one_line(argv: list[str]):
    """Argument errors that argparse itself catches (so `run` and `schedule` never start anything)."""
    rc, out, err = run_cli(argv)
    check_outcome(argv, rc, out, err, allowed=(2,))


@given(
    keep=st.one_of(st.integers(min_value=-3, max_value=5).map(str), junk),
    keep_days=st.one_of(numbers, st.just("0")),
    target=st.sampled_from(["root", "file", "missing", "run"]),
    dry=st.booleans(),
)
def test_prune_arguments_never_trace_back(tmp_path: Path, keep: str, keep_days: str, target: str, dry: bool):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    for i in range(2):
        d = root / f"run{i}" / "_runner"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"status": "finished", "started_at": i}))
    (root / "afile").write_text("x")
    path = {"root": root, "file": root / "afile", "missing": root / "none", "run": root / "run0"}[target]
    argv = [
        "prune",
        f"--results={path}",
        f"--keep={keep}",
        f"--keep-days={keep_days}",
        *(["--dry-run"] * dry),
    ]
    rc, out, err = run_cli(argv)
    check_outcome(argv, rc, out, err)
    assert (root / "afile").exists()  # never touches what is not a run


# -- reading commands over damaged results -----------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-campaign")
    return rf.demo_campaign(root, run_id="base", tps=(1,), concurrencies=(1, 2))


def _files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file())


def _json_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _json_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            out += _json_paths(v, (*prefix, i))
    return out


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    ),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)

damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(min_value=0, max_value=1)),
    st.tuples(st.just("binary"), st.binary(min_size=0, max_size=64)),
    st.tuples(st.just("delete"), st.none()),
    st.tuples(st.just("duplicate"), st.none()),
    st.tuples(st.just("value"), json_values),
    st.tuples(st.just("schema"), st.sampled_from(["sglbench.attempt/2", "x", "", "sglbench.bench/1"])),
)


def damaged_copy(base: Path, where: Path, pick: int, what: tuple[str, Any]) -> Path:
    """A copy of the run ``base`` (under ``where``) with one file damaged as ``what`` says."""
    run = where / "res" / base.name
    shutil.copytree(base, run)
    files = [p for p in _files(run) if p.suffix in (".json", ".jsonl")]
    target = files[pick % len(files)]
    kind, arg = what
    if kind == "truncate":
        data = target.read_bytes()
        target.write_bytes(data[: int(len(data) * arg)])
    elif kind == "binary":
        target.write_bytes(arg)
    elif kind == "delete":
        target.unlink()
    elif kind == "duplicate":
        shutil.copytree(run, run.with_name(run.name + "-copy"))
    elif kind == "schema" and target.name == "record.json":
        doc = json.loads(target.read_text())
        doc["schema"] = arg
        target.write_text(json.dumps(doc))
    elif target.name == "record.json":  # replace one value somewhere in the record
        doc = json.loads(target.read_text())
        paths = _json_paths(doc)[1:]
        path = paths[pick % len(paths)]
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = arg
        target.write_text(json.dumps(doc))  # NaN/Infinity kept as Python writes them
    else:  # a request-row file: damage one row's value
        lines = target.read_text().splitlines()
        if lines:
            row = json.loads(lines[pick % len(lines)])
            row[sorted(row)[pick % len(row)]] = arg
            lines[pick % len(lines)] = json.dumps(row)
            target.write_text("\n".join(lines) + "\n")
    return run


@given(
    pick=st.integers(min_value=0, max_value=10_000),
    what=damage,
    fmt=st.sampled_from(["md", "csv"]),
    seed=st.sampled_from(["0", "7", "-1", "x", "18446744073709551616"]),
    boot=st.sampled_from(["100", "2000", "99", "99999999999", "abc"]),
)
def test_summarize_and_compare_over_damaged_results(
    tmp_path: Path, campaign: Path, pick, what, fmt, seed, boot
):
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    run = damaged_copy(campaign, where, pick, what)
    target = run.parent if what[0] == "duplicate" else run
    argv = ["summarize", str(target), f"--format={fmt}", f"--seed={seed}", f"--bootstrap={boot}"]
    check_outcome(argv, *run_cli(argv))
    argv = ["compare", str(campaign), str(target), f"--seed={seed}"]
    check_outcome(argv, *run_cli(argv))
    argv = ["compare", str(target), str(campaign)]
    check_outcome(argv, *run_cli(argv))


@settings(max_examples=6)  # a report renders six plots: keep it to a few damaged examples
@given(pick=st.integers(min_value=0, max_value=10_000), what=damage)
def test_report_over_damaged_results(tmp_path: Path, campaign: Path, pick, what):
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    run = damaged_copy(campaign, where, pick, what)
    out = where / "out" / "report.html"
    argv = ["report", str(run.parent if what[0] == "duplicate" else run), "-o", str(out)]
    rc, stdout, err = run_cli(argv)
    check_outcome(argv, rc, stdout, err, allowed=(0, 2))
    if rc == 2 and (where / "out").exists():  # a refused report leaves nothing behind
        assert list((where / "out").iterdir()) == []


OUTPUT_PATHS = ["dir", "proc", "proc-dir", "missing", "file-as-dir"]


def _output_paths(tmp_path: Path, out: str) -> tuple[Path, Path, Path]:
    """A fresh directory and the summary and report paths of one kind of output path in it."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    (base / "f").write_text("x")
    summary_path, report_path = {
        "dir": (base, base),
        "proc": (Path("/proc/sglbench-fuzz.out"), Path("/proc/sglbench-fuzz.html")),
        "proc-dir": (Path("/proc"), Path("/proc/sys")),
        "missing": (base / "a" / "b" / "s.out", base / "a" / "c" / "r.html"),
        "file-as-dir": (base / "f" / "s.out", base / "f" / "r.html"),
    }[out]
    return base, summary_path, report_path


@given(out=st.sampled_from(OUTPUT_PATHS), fmt=st.sampled_from(["md", "csv", "parquet"]))
def test_output_paths_never_trace_back(tmp_path: Path, campaign: Path, out: str, fmt: str):
    base, summary_path, _ = _output_paths(tmp_path, out)
    argv = ["summarize", str(campaign), f"--format={fmt}", "-o", str(summary_path)]
    check_outcome(argv, *run_cli(argv))
    assert not [p for p in base.rglob("*.tmp")], "temp files left behind"


@pytest.mark.parametrize("out", OUTPUT_PATHS)
def test_report_output_paths_never_trace_back(tmp_path: Path, campaign: Path, out: str):
    """The report has no format to vary: each kind of output path once (it renders every plot)."""
    base, _, report_path = _output_paths(tmp_path, out)
    argv = ["report", str(campaign), "-o", str(report_path)]
    check_outcome(argv, *run_cli(argv), allowed=(0, 2))
    assert not [p for p in base.rglob("*.tmp")], "temp files left behind"
