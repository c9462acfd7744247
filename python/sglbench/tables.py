"""Plain-text tables of the reading commands: markdown (``--format md``) and aligned columns
(``--format text``), both from rows of already formatted cells (the first row's keys are the columns)."""

from __future__ import annotations

from collections.abc import Sequence

EMPTY = "(no rows)"


def markdown(rows: Sequence[dict[str, str]]) -> str:
    if not rows:
        return EMPTY
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(r.get(c, "").replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines)


def text(rows: Sequence[dict[str, str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, a dashed line under the header."""
    if not rows:
        return EMPTY
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols).rstrip()]
    lines.append("  ".join("-" * width[c] for c in cols))
    for r in rows:
        lines.append("  ".join(r.get(c, "").ljust(width[c]) for c in cols).rstrip())
    return "\n".join(lines)


def render(rows: Sequence[dict[str, str]], fmt: str) -> str:
    """``fmt`` is ``md`` or ``text``."""
    return markdown(rows) if fmt == "md" else text(rows)
