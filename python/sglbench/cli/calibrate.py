"""`sglbench calibrate`: the arguments; the calibration is run by `python/sglbench/calibrate.py`."""

from __future__ import annotations

import argparse

from sglbench.calibrate import run_calibrate
from sglbench.cli.bench import THRESHOLDS_HELP, add_load_args


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = subparsers.add_parser(
        "calibrate",
        help="measure the load generator's own ceiling against a built-in null server on loopback",
        description="Start a null SGLang server (separate process, loopback) that streams chunks with "
        "known timing, run the same load against it and report requests/s and chunks/s the client "
        "sustained. " + THRESHOLDS_HELP,
    )
    add_load_args(c, calibrate=True)
    c.add_argument("--chunk-tokens", type=int, default=1, help="tokens per streamed chunk (default 1)")
    c.add_argument("--ttft-ms", type=float, default=0.0, help="null server time to first chunk (default 0)")
    c.add_argument("--gap-ms", type=float, default=0.0, help="null server gap between chunks (default 0)")
    c.add_argument("--server-procs", type=int, default=1, help="null server processes sharing the port")
    c.set_defaults(func=run_calibrate)
