"""Ansible callback: load the controller code of this project's plugins once, in the main process."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader

DOCUMENTATION = r"""
name: sglbench_preload
type: aggregate
short_description: Load sglbench's controller plugins and libraries once, before Ansible forks its workers
description:
  - Ansible runs every task in a worker process forked from its main process; whatever the main process has
    not loaded, each worker loads again. This project's filter and action plugins import the sglbench
    package, and the benchmark's assemble step imports pyarrow (and, on its first conversion, pyarrow's
    pandas shim); loaded here once, every worker inherits them.
  - Prints nothing and changes no result. Enabled in the project's ansible.cfg (C(callbacks_enabled)).
"""

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

ACTIONS = ("sglbench_points", "sglbench_record")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglbench_preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        for _ in filter_loader.all():
            pass
        for name in ACTIONS:
            action_loader.get(name, class_only=True)
        # without pyarrow the results are kept as JSON lines (sglbench.resume)
        with contextlib.suppress(ImportError):
            from sglbench import columnar

            columnar.warm_up()
