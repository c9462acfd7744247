"""What counts as a secret on the controller side, and how it is kept out of argv and readable files.

One rule for ``sglbench run -e``, ``sglbench schedule`` (its run arguments and environment), the lock
file and ``run.json``: a variable whose *name* looks like a secret (``sglbench_api_key``,
``HF_TOKEN``, ``*_PASSWORD``, ...) or whose *value* looks like a credential (``hf_...``, ``sk-...``) may
not travel on a command line, which every local user can read with ``ps``. Secrets reach the
playbook from the inventory (a vault) or from the environment of ``sglbench run``
(``SGLBENCH_API_KEY``, ``HF_TOKEN``); see docs/operations.md.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Name parts that make a variable a secret (matched on _/- separated words, case-insensitive).
SECRET_NAME_RE = re.compile(
    r"(^|[_-])(api[_-]?key|apikey|key|token|secret|secrets|password|passwd|pwd|passphrase|credentials?|"
    r"auth|authorization|cookie|private|session)($|[_-])",
    re.IGNORECASE,
)
# Names that contain one of those words but are not secrets.
NOT_SECRET_NAMES = frozenset(
    {
        "sglbench_api_key_env",
        "key",  # too generic on its own to refuse (e.g. a sort key)
    }
)
# Values that look like a credential whatever the name: common token prefixes.
SECRET_VALUE_RE = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|ghp_[A-Za-z0-9]{20,}|gh[ousr]_[A-Za-z0-9]{20,}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\..*)$"
)
REDACTED = "<redacted>"


def secret_name(name: str) -> bool:
    return name.lower() not in NOT_SECRET_NAMES and bool(SECRET_NAME_RE.search(name))


def secret_value(value: Any) -> bool:
    return isinstance(value, str) and bool(SECRET_VALUE_RE.match(value.strip()))


def secret_paths(data: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every secret-looking entry of a JSON-like value (names or values)."""
    found: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if secret_name(str(k)) and v not in (None, "", [], {}):
                found.append(path)
            else:
                found.extend(secret_paths(v, path))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found.extend(secret_paths(v, f"{prefix}[{i}]"))
    elif secret_value(data):
        found.append(prefix or "value")
    return found


def redact(data: Any) -> Any:
    """A copy with every secret-looking entry replaced by ``<redacted>``."""
    if isinstance(data, dict):
        return {
            k: (REDACTED if secret_name(str(k)) and v not in (None, "", [], {}) else redact(v))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [redact(v) for v in data]
    return REDACTED if secret_value(data) else data


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with the values of secret-looking ``-e KEY=VALUE`` / JSON extra variables and
    ``--api-key``-style options replaced (for lock files and run.json)."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _val = word.partition("=")
        if word.startswith("--") and secret_name(flag.lstrip("-")):
            out.append(f"{flag}={REDACTED}" if eq else word)
            hide_next = not eq
            continue
        key, sep, raw = word.partition("=")
        if sep and not word.startswith("-") and secret_name(key):
            out.append(f"{key}={REDACTED}")
            continue
        if word.lstrip().startswith("{"):
            try:
                parsed = json.loads(word)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and secret_paths(parsed):
                out.append(json.dumps(redact(parsed)))
                continue
        out.append(REDACTED if secret_value(word) or secret_value(raw) else word)
    return out
