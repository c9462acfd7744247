"""Load levels named once: the default concurrency ladder and the label of one load point.

Standard library only. The load generator on the GPU host (``loadgen``) names the points it
measures with :func:`point_label`; the resume plan on the controller (``sglbench.resume``) names the
points it expects the same way, so a point file's key matches what the host measured.
"""

from __future__ import annotations

DEFAULT_LADDER_CAP = 64  # ladder cap when neither the user nor the server gives one


def concurrency_ladder(cap: int) -> list[int]:
    """1, 2, 4, ... up to ``cap`` (included even when not a power of two); ValueError when ``cap < 1``."""
    if cap < 1:
        raise ValueError(f"ladder cap must be >= 1, got {cap}")
    out, c = [], 1
    while c < cap:
        out.append(c)
        c *= 2
    out.append(cap)
    return out


def point_label(concurrency: int | None, request_rate: float | str | None) -> str:
    """The point's name: ``c4`` (closed loop), ``r2.5`` (Poisson rate), ``r2.5-c8`` (capped), ``rinf``."""
    if request_rate is None:
        return f"c{concurrency}"
    cap = f"-c{concurrency}" if concurrency else ""
    return f"r{float(request_rate):g}{cap}"
