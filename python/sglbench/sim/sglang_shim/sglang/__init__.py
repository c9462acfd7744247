"""Stand-in ``sglang`` package for sglbench sim hosts (NOT SGLang).

Installed on sim hosts so the exact command a real unit runs works unchanged:
``python -m sglang.launch_server <SGLang flags>`` starts the sglbench stand-in
(``sglbench.sim``). ``__version__`` is ``SGLBENCH_SIM_SGLANG_VERSION`` when set, else
``0.0.0+sglbench.sim`` (which the capacity planner maps to accounting variant A).
"""

import os as _os

__version__ = _os.environ.get("SGLBENCH_SIM_SGLANG_VERSION") or "0.0.0+sglbench.sim"
SGLBENCH_SIM = True
