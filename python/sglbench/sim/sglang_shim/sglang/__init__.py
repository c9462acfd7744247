"""Stand-in ``sglang`` package for sglbench sim hosts (NOT SGLang).

Installed on sim hosts so the exact command a real unit runs works unchanged:
``python -m sglang.launch_server <SGLang flags>`` starts the sglbench stand-in
(``sglbench.sim``), and code that asks the installed SGLang for its launch parser
(``sglang.srt.server_args.ServerArgs.add_cli_args``) gets the impersonated release's flags.

``__version__`` is the release the stand-in impersonates: ``SGLBENCH_SIM_SGLANG_VERSION`` when set,
else the newest catalogued public SGLang release (``sglbench.sim.release``).

``__sglbench_accounting__`` tells the capacity planner (``sglbench_plan`` module,
``hostlib/plan_inputs.py``) which memory-accounting variant the stand-in emulates:
``SGLBENCH_SIM_ACCOUNTING`` when set (upper-cased), else None, and the planner then maps
``__version__`` exactly as the stand-in does. Real SGLang has no such attribute.
"""

import os as _os


def _version() -> str:
    value = (_os.environ.get("SGLBENCH_SIM_SGLANG_VERSION") or "").strip()
    if value:
        return value
    from sglbench.sim import release as _release

    return _release.newest_public()


__version__ = _version()
__sglbench_accounting__ = (_os.environ.get("SGLBENCH_SIM_ACCOUNTING") or "").strip().upper() or None
SGLBENCH_SIM = True
