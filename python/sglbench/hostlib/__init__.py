"""Stdlib-only code shared by the controller and the GPU host.

This package is ``sglbench.hostlib`` on the controller and, through the directory symlink
``plugins/module_utils/sglbench_hostlib``, ``ansible.module_utils.sglbench_hostlib`` on the host:
Ansible ships every module here that a module in ``plugins/modules/`` imports, directly or through
a sibling. Modules here import only the standard library and their siblings, the siblings with
relative imports (``from . import sglang_facts``), which resolve in both places. Data files
(``sglang_catalogs/``, the prompt sets) stay on the controller; modules get them as arguments.
"""
