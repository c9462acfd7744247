"""Plan and apply a set of managed files in one directory (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.unit_files`` for the ``sglbench_unit_files``
module, which installs every SGLang systemd unit in one round trip: the controller renders the
texts, this code decides what to write and what to remove (files carrying our marker that are no
longer wanted), writes atomically, and builds Ansible's ``--diff`` entries.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .atomic_file import write_atomic

__all__ = ["FilePlan", "diff_entries", "plan_files", "read_matching", "write_atomic"]


@dataclass
class FilePlan:
    write: dict[str, str] = field(default_factory=dict)  # name -> new content (new or changed)
    remove: list[str] = field(default_factory=list)  # managed files no longer wanted
    unchanged: list[str] = field(default_factory=list)
    before: dict[str, str] = field(default_factory=dict)  # name -> current content of changed/removed files

    @property
    def changed(self) -> bool:
        return bool(self.write or self.remove)


def plan_files(
    existing: Mapping[str, str], desired: Mapping[str, str], pattern: str, marker: str
) -> FilePlan:
    """Compare the directory's ``existing`` files (name -> content) with the ``desired`` ones.

    A file is removed only when its name matches ``pattern``, it contains ``marker`` (we made it),
    and it is not desired; files someone else made are never touched.
    """
    plan = FilePlan()
    for name in sorted(desired):
        current = existing.get(name)
        if current == desired[name]:
            plan.unchanged.append(name)
        else:
            plan.write[name] = desired[name]
            if current is not None:
                plan.before[name] = current
    for name in sorted(existing):
        if name in desired or not fnmatch.fnmatch(name, pattern) or marker not in existing[name]:
            continue
        plan.remove.append(name)
        plan.before[name] = existing[name]
    return plan


def diff_entries(plan: FilePlan, directory: str) -> list[dict[str, str]]:
    """Ansible ``diff`` entries (one per written or removed file)."""
    entries = []
    for name, content in plan.write.items():
        path = os.path.join(directory, name)
        entries.append(
            {
                "before_header": path if name in plan.before else f"{path} (absent)",
                "after_header": path,
                "before": plan.before.get(name, ""),
                "after": content,
            }
        )
    for name in plan.remove:
        path = os.path.join(directory, name)
        entries.append(
            {
                "before_header": path,
                "after_header": f"{path} (absent)",
                "before": plan.before[name],
                "after": "",
            }
        )
    return entries


def read_matching(directory: str, names: list[str], pattern: str) -> dict[str, str]:
    """Contents of the ``names`` present in ``directory`` plus every file matching ``pattern``."""
    wanted = set(names)
    try:
        listing = os.listdir(directory)
    except FileNotFoundError:
        return {}
    out: dict[str, str] = {}
    for name in listing:
        if name not in wanted and not fnmatch.fnmatch(name, pattern):
            continue
        path = os.path.join(directory, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            out[name] = fh.read()
    return out
