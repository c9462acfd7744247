"""Import hook of the real-SGLang env (on PYTHONPATH through env.sh): once ``sgl_kernel`` is imported,
give it the pure-torch CPU ops it lacks (sgl_kernel_cpu_ops.py beside this file).

Python imports ``sitecustomize`` at start-up in every process, SGLang's scheduler subprocesses
included; this file imports nothing heavy itself, it only watches for ``sgl_kernel``.
SGLBENCH_CPU_SPEC_OPS=0 turns it off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType


class _AfterExec(importlib.abc.Loader):
    """Runs the real loader, then installs the ops on the fresh module."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            import sgl_kernel_cpu_ops
        finally:
            sys.path.pop(0)
        sgl_kernel_cpu_ops.install(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "sgl_kernel":
            return None
        sys.meta_path.remove(self)  # once; the other finders locate the real package
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        if spec is not None and spec.loader is not None:
            spec.loader = _AfterExec(spec.loader)
        return spec


if os.environ.get("SGLBENCH_CPU_SPEC_OPS", "1") != "0":
    sys.meta_path.insert(0, _Finder())
