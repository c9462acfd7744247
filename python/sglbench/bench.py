"""``sglbench bench``: the prompt benchmark against a running server, and the helpers that
``sglbench calibrate`` (``python/sglbench/calibrate.py``) shares with it. The arguments are parsed in
``python/sglbench/cli/bench.py``.

Check the parsed arguments, build a :class:`~sglbench.hostlib.loadgen.BenchSpec`, run it, write
``summary.json`` + ``requests.jsonl`` (+ ``requests.parquet``, :mod:`sglbench.columnar`, when pyarrow is
importable) atomically.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from sglbench.hostlib import loadgen, metrics, prompts, sessions
from sglbench.hostlib.atomic_file import write_atomic
from sglbench.records import stand_in_time_scale

SCHEMA = loadgen.SUMMARY_SCHEMA


class UsageError(Exception):
    """Bad command-line input; exit code 2."""


# -- argument helpers ---------------------------------------------------------------------------------
def parse_int_list(text: str, flag: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated integers, e.g. 1,4,16 (got {text!r})") from None
    if not vals or any(v < 1 for v in vals):
        raise UsageError(f"{flag} needs integers >= 1 (got {text!r})")
    return vals


def parse_float_list(text: str, flag: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated numbers, e.g. 2,4.5 (got {text!r})") from None
    if not vals or any(not v > 0 for v in vals):  # NaN is not > 0 either
        raise UsageError(f"{flag} needs numbers > 0 (got {text!r})")
    return vals


def check_number(value: float | None, flag: str, *, lo: float, hi: float, lo_open: bool = True) -> None:
    """UsageError unless ``value`` (when given) is a finite number in (lo, hi] (or [lo, hi])."""
    if value is None:
        return
    ok = (lo < value if lo_open else lo <= value) and value <= hi  # NaN fails both
    if not ok:
        low = f"> {lo:g}" if lo_open else f">= {lo:g}"
        high = f"{int(hi)}" if float(hi).is_integer() else f"{hi:g}"
        raise UsageError(f"{flag} must be a number {low} and <= {high}, got {value}")


def read_api_key(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        key = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"--api-key-file {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(
            f"--api-key-file {path} is not text; put the server's --api-key value in it"
        ) from None
    if not key:
        raise UsageError(f"--api-key-file {path} is empty; put the server's --api-key value in it")
    if not (key.isascii() and key.isprintable()) or any(c.isspace() for c in key):
        raise UsageError(
            f"--api-key-file {path}: the key must be one word of printable ASCII (sent in an HTTP header)"
        )
    return key


def build_points(
    concurrency: list[int] | None, rates: list[float] | None, ladder_cap: int | None
) -> list[loadgen.LoadPoint]:
    """Rates × (one cap) or a concurrency list, or the default 1, 2, 4, … ladder up to ``ladder_cap``."""
    if rates:
        if concurrency and len(concurrency) > 1:
            raise UsageError(
                "with --request-rate, --concurrency is the one in-flight cap: give a single value"
            )
        cap = concurrency[0] if concurrency else None
        return [loadgen.LoadPoint(concurrency=cap, request_rate=r) for r in rates]
    levels = concurrency or loadgen.concurrency_ladder(ladder_cap or loadgen.DEFAULT_MAX_CONCURRENCY)
    return [loadgen.LoadPoint(concurrency=c) for c in levels]


def cli_words(msg: str) -> str:
    """A BenchSpec validation message in command-line words (the fix names the flags)."""
    return msg.replace("lower procs", "lower --procs").replace(
        "use concurrency levels", "give --concurrency levels"
    )


def slo_from_args(args: argparse.Namespace) -> metrics.Slo:
    for name in ("slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms"):
        v = getattr(args, name)
        if v is not None and not 0 < v < math.inf:
            raise UsageError(f"--{name.replace('_', '-')} must be a finite number of ms > 0, got {v}")
    return metrics.Slo(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms, e2e_ms=args.slo_e2e_ms)


# -- output -------------------------------------------------------------------------------------------
# Result files are owner-only (0600), as they have always been written.
RESULT_MODE = 0o600


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN/infinite float replaced by None (strict JSON has no spelling for them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def _dumps(obj: Any, **kw: Any) -> str:
    """Strict JSON; a non-finite float (never expected: inputs are checked) is written as null, not lost."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        return json.dumps(finite_json(obj), allow_nan=False, **kw)


def write_results(result: loadgen.CampaignResult, out: Path) -> list[Path]:
    """``summary.json``, ``requests.jsonl`` (+ ``requests.parquet``) in ``out``: everything is serialised
    before the first file is written, and each file is written atomically."""
    rows = loadgen.record_rows(result)
    lines = "".join(_dumps(r, separators=(",", ":")) + "\n" for r in rows)
    summary_text = _dumps(loadgen.campaign_summary(result), indent=1) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.json", out / "requests.jsonl"]
    write_atomic(out / "requests.jsonl", lines, RESULT_MODE)
    write_atomic(out / "summary.json", summary_text, RESULT_MODE)
    try:  # a convenience copy of requests.jsonl: its failure never costs the measurement
        parquet = write_parquet(rows, out / "requests.parquet")
    except Exception as exc:
        print(
            f"sglbench: warning: requests.parquet not written ({type(exc).__name__}: {exc})", file=sys.stderr
        )
        parquet = None
    if parquet is not None:
        written.append(parquet)
    return written


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """The rows as ``requests.parquet`` with the derived columns (:mod:`sglbench.columnar`); None without
    pyarrow or rows."""
    try:
        from sglbench import columnar
    except ImportError:
        return None
    if not rows:
        return None
    return columnar.write_rows(rows, path, RESULT_MODE)


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def data_label(summary: dict[str, Any]) -> str:
    """What produced the figures, ahead of the table: the stand-in, the real SGLang's CPU engine
    (``/server_info`` ``device`` is ``cpu``), or nothing for a GPU server."""
    if summary.get("simulated"):
        return "SIMULATED — "
    info = (summary.get("meta") or {}).get("server_info") or {}
    if isinstance(info, dict) and info.get("device") == "cpu":
        return "CPU ENGINE (real SGLang, --device cpu; not GPU figures) — "
    return ""


def format_table(summary: dict[str, Any]) -> str:
    label = data_label(summary)
    head = (
        f"{'point':>10} {'rep':>3} {'ok':>5} {'err':>4} {'tok/s':>9} {'req/s':>7} {'ttft50':>8} "
        f"{'ttft99':>8} {'tpot50':>7} {'itl50':>7} {'e2e50':>8} {'accept':>6}  valid"
    )
    lines = [f"{label}{summary['meta'].get('api')} @ {summary['meta'].get('url')}"]
    scale = stand_in_time_scale((summary.get("meta") or {}).get("server_info"))
    if scale is not None and scale != 1.0:
        lines.append(
            f"stand-in time scale {scale:g}: figures below are at stand-in speed, i.e. rates x{1 / scale:g} "
            f"and latencies x{scale:g} of real-world time (sglbench summarize on a run shows them at "
            "real-world time)"
        )
    lines.append(head)
    for p in summary["points"]:
        lines.append(
            f"{p['point']:>10} {p['repeat']:>3} {p['n_ok']:>5} {p['n_err']:>4} "
            f"{_fmt(p['output_throughput_tok_s']):>9} {_fmt(p['request_throughput'], '.2f'):>7} "
            f"{_fmt(p['ttft_ms']['p50']):>8} {_fmt(p['ttft_ms']['p99']):>8} "
            f"{_fmt(p['tpot_ms']['p50'], '.2f'):>7} "
            f"{_fmt(p['itl_ms']['p50'], '.2f'):>7} {_fmt(p['e2e_ms']['p50']):>8} "
            f"{_fmt(p['accept_length_mean'], '.2f'):>6}  "
            + ("yes" if p["valid"] else "NO: " + "; ".join(p["invalid_reasons"]))
        )
    return "\n".join(lines)


def _progress(msg: str) -> None:
    print(f"sglbench bench: {msg}", file=sys.stderr, flush=True)


# -- bench --------------------------------------------------------------------------------------------
def _check_common(args: argparse.Namespace) -> None:
    if args.num_prompts is not None and args.num_prompts < 1:
        raise UsageError("--num-prompts must be >= 1")
    check_number(args.duration, "--duration (seconds)", lo=0, hi=loadgen.MAX_SECONDS)
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be >= 1")
    if args.warmup is not None and not 0 <= args.warmup <= loadgen.MAX_WARMUP:
        raise UsageError(f"--warmup must be from 0 to {loadgen.MAX_WARMUP} requests, got {args.warmup}")
    if not 1 <= args.procs <= loadgen.MAX_PROCS:
        raise UsageError(f"--procs must be from 1 to {loadgen.MAX_PROCS} client processes, got {args.procs}")


def _prepare_out(out: Path | None, overwrite: bool) -> None:
    """Check ``--out`` before anything is measured: it is (or can be made) a directory we can write to."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if (out / "summary.json").exists() and not overwrite:
        raise UsageError(
            f"--out {out} already holds results (summary.json); choose a new directory or pass --overwrite"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".sglbench-write-check.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"--out {out}: cannot write there ({exc.strerror or exc}); give a directory you can write to"
        ) from None


def run_bench(args: argparse.Namespace) -> int:
    try:
        return _run_bench(args)
    except OSError as exc:  # writing the results (disk full, permissions changed during the run)
        print(f"sglbench bench: error: cannot write the results to {args.out}: {exc}", file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"sglbench bench: error: {exc}", file=sys.stderr)
        return 2
    except (loadgen.LoadgenError, prompts.PromptError) as exc:
        print(f"sglbench bench: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, prompts.PromptError) else 1
    except KeyboardInterrupt:
        print(f"sglbench bench: interrupted; nothing was written to {args.out}", file=sys.stderr)
        return 130


def _run_bench(args: argparse.Namespace) -> int:
    _check_common(args)
    if args.out is None:
        raise UsageError("--out DIR is required")
    _prepare_out(args.out, args.overwrite)
    if args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    if args.max_concurrency is not None and not 1 <= args.max_concurrency <= loadgen.MAX_CONCURRENCY:
        raise UsageError(f"--max-concurrency must be from 1 to {loadgen.MAX_CONCURRENCY}")
    check_number(args.request_timeout, "--request-timeout (seconds)", lo=0, hi=loadgen.MAX_SECONDS)
    check_number(args.temperature, "--temperature", lo=0, hi=1e6, lo_open=False)
    check_number(args.max_error_rate, "--max-error-rate (a fraction of requests)", lo=0, hi=1, lo_open=False)
    concurrency = parse_int_list(args.concurrency, "--concurrency") if args.concurrency else None
    rates = parse_float_list(args.request_rate, "--request-rate") if args.request_rate else None
    api_key = read_api_key(args.api_key_file)
    slo = slo_from_args(args)
    # Synthetic prompts are checked now but built only once the server answered (they can be large);
    # prompt files and shipped sets are read now, so a bad one is reported before any connection.
    synthetic_len = prompts.parse_synthetic(args.prompts)
    synthetic_n = 0
    if synthetic_len is not None:
        # As many distinct prompts as requests per point, at least 64 when they fit in memory.
        synthetic_n = max(min(64, prompts.MAX_SYNTHETIC_IDS // synthetic_len), args.num_prompts or 0)
        prompts.check_synthetic(synthetic_n, synthetic_len)
        prompt_list = [prompts.Prompt("synthetic", "synthetic", input_ids=(prompts.SYNTHETIC_ID_RANGE[0],))]
    else:
        prompt_list = prompts.resolve_prompt_source(args.prompts, seed=args.seed)
    cap = args.max_concurrency
    spec = loadgen.BenchSpec(
        url=args.url,
        prompts=prompt_list,
        points=build_points(concurrency, rates, cap),
        api=args.api,
        model=args.model,
        sampling=loadgen.SamplingSpec(
            max_new_tokens=args.max_new_tokens or 256,
            temperature=args.temperature,
            ignore_eos=args.ignore_eos,
        ),
        num_prompts=args.num_prompts or (10**9 if args.duration else 200),
        duration_s=args.duration,
        warmup=args.warmup,
        repeats=args.repeats,
        seed=args.seed,
        flush_cache=not args.no_flush_cache,
        api_key=api_key,
        request_timeout_s=args.request_timeout,
        slo=slo,
        simulated=args.simulated,
        procs=args.procs,
        max_error_rate=args.max_error_rate,
    )
    try:
        spec.validate()
    except loadgen.LoadgenError as exc:
        raise UsageError(cli_words(str(exc))) from None
    loadgen.check_reachable(args.url, api_key)
    if synthetic_len is not None:
        spec.prompts = prompts.synthetic_prompts(synthetic_n, synthetic_len, args.seed)
    if not concurrency and not rates and cap is None:
        # Default ladder: 1, 2, 4, ... up to what the server can actually run at once.
        cap = loadgen.effective_max_running_requests(loadgen.fetch_server_info(args.url, api_key))
        spec.points = build_points(None, None, cap)
        _progress(
            f"ladder capped at {cap or loadgen.DEFAULT_MAX_CONCURRENCY} "
            f"({'server effective max running requests' if cap else 'default'})"
        )
    result = loadgen.run_campaign(spec, progress=_progress)
    result.meta["prompts"] = args.prompts
    result.meta["command"] = "bench"
    files = write_results(result, args.out)
    summary = json.loads(files[0].read_text())
    print(format_table(summary))
    turns = sessions.format_turns(summary["points"])
    if turns:
        print(turns)
    print("wrote " + ", ".join(str(f) for f in files))
    return verdict(summary)


def verdict(summary: dict[str, Any]) -> int:
    """0 when every point is valid; else 1 with one line on stderr naming the first invalid point."""
    points = summary.get("points") or []
    bad = [p for p in points if not p.get("valid")]
    if points and not bad:
        return 0
    if not points:
        print("sglbench bench: no point was measured", file=sys.stderr)
        return 1
    first = bad[0]
    n_ok = sum(int(p.get("n_ok") or 0) for p in points)
    head = "no request succeeded" if n_ok == 0 else f"{len(bad)} of {len(points)} points invalid"
    print(
        f"sglbench bench: {head} (first: {first.get('point')} repeat {first.get('repeat')}: "
        f"{'; '.join(first.get('invalid_reasons') or ['invalid'])}); exit 1",
        file=sys.stderr,
    )
    return 1
