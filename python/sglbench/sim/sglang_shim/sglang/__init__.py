"""Stand-in ``sglang`` package for sglbench sim hosts (NOT SGLang).

Installed on sim hosts so the exact command a real unit runs works unchanged:
``python -m sglang.launch_server <SGLang flags>`` starts the sglbench stand-in
(``sglbench.sim``). ``__version__`` is ``SGLBENCH_SIM_SGLANG_VERSION`` when set, else
``0.0.0+sglbench.sim`` (which the capacity planner maps to accounting variant A).

``__sglbench_accounting__`` tells the capacity planner (``sglbench_plan`` module,
``hostlib/plan_inputs.py``) which memory-accounting variant the stand-in emulates:
``SGLBENCH_SIM_ACCOUNTING`` when set (upper-cased), else None, and the planner then maps
``__version__`` exactly as the stand-in does. Real SGLang has no such attribute.
"""

import os as _os

__version__ = _os.environ.get("SGLBENCH_SIM_SGLANG_VERSION") or "0.0.0+sglbench.sim"
__sglbench_accounting__ = (_os.environ.get("SGLBENCH_SIM_ACCOUNTING") or "").strip().upper() or None
SGLBENCH_SIM = True
