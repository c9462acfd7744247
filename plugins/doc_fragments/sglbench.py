"""Documentation every sglbench module shares: its attributes and author.

A module lists ``extends_documentation_fragment: [sglbench]`` in its DOCUMENTATION and states only what
differs (``attributes.check_mode`` or ``attributes.diff_mode`` of its own replaces the one here).
``ansible.cfg`` (``doc_fragment_plugins``) points ``ansible-doc`` here.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - sglbench
"""
