"""Stand-in ``sglang.srt`` for sglbench sim hosts (NOT SGLang): only ``server_args``."""
