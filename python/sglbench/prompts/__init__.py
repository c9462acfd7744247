"""Shipped prompt sets (package data), one JSONL file per content category.

``math``, ``code``, ``chat``, ``summarize`` and ``long-context`` were written for this project:
speculative-decoding acceptance depends on content, so results are reported per category. Each line is
``{"id", "category", "prompt"}``; lines starting with ``#`` are comments. The loader lives in
``sglbench.hostlib.prompts`` so the GPU-host module can parse the same records it receives as a
parameter list.
"""
