"""Stdlib-only code shared by the controller and the GPU host.

Every module here is also shipped to the GPU host as ``ansible.module_utils.sglbench_<name>``
through a symlink in ``plugins/module_utils/`` (one source of truth, never two copies). Modules
here must import only the standard library and their hostlib siblings (with the
``ansible.module_utils`` fallback pattern).
"""
