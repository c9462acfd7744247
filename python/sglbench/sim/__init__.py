"""SGLang stand-in ("sim"): behaves like ``python -m sglang.launch_server`` on the wire and in its logs.

Standard library only. See README.md in this directory for the SGLBENCH_SIM_* settings.
"""
