"""Reading a systemd unit's state and its journal from the GPU host (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.systemd_unit``. The parsing functions are
pure; the two helpers that run ``systemctl``/``journalctl`` take the command runner as an argument
so tests can feed recorded output.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

SHOW_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "InvocationID",
    "MainPID",
    "ExecMainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "ExecMainStartTimestampMonotonic",
    "ExecMainExitTimestampMonotonic",
    "ExecMainExitTimestamp",
)

# ExecMainCode values (siginfo si_code) systemd reports: 1 exited, 2 killed, 3 dumped.
EXIT_CODES = {"0": "", "1": "exited", "2": "killed", "3": "dumped"}

Runner = Callable[[Sequence[str]], tuple[int, str, str]]


def run_command(argv: Sequence[str], timeout: float = 10.0) -> tuple[int, str, str]:
    """Run ``argv`` and return ``(rc, stdout, stderr)`` (text, never raises on non-zero exit)."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return 127, "", f"{argv[0]}: {err}"
    return proc.returncode, proc.stdout, proc.stderr


@dataclass(frozen=True)
class UnitState:
    """A snapshot of ``systemctl show`` for one unit."""

    unit: str
    load_state: str
    active_state: str
    sub_state: str
    result: str
    invocation_id: str
    main_pid: int
    exec_main_code: str
    exec_main_status: int | None
    exec_main_start_monotonic_us: int
    exec_main_exit_monotonic_us: int

    @property
    def main_exited(self) -> bool:
        """The main process of the current start has exited (even if an ExecStartPost still runs)."""
        exit_us, start_us = self.exec_main_exit_monotonic_us, self.exec_main_start_monotonic_us
        return bool(self.exec_main_code) and exit_us >= start_us

    @property
    def running(self) -> bool:
        """The main process is (still) alive as far as systemd knows."""
        if self.main_exited:
            return False
        return self.active_state in ("active", "activating", "reloading") and self.sub_state not in (
            "exited",
            "dead",
            "failed",
        )

    @property
    def ended(self) -> bool:
        """The start is over: the unit failed, exited or is no longer active."""
        return not self.running

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "load_state": self.load_state,
            "active_state": self.active_state,
            "sub_state": self.sub_state,
            "result": self.result,
            "invocation_id": self.invocation_id,
            "main_pid": self.main_pid,
            "exec_main_code": self.exec_main_code,
            "exec_main_status": self.exec_main_status,
        }

    def describe(self) -> str:
        text = f"{self.unit} is {self.active_state}/{self.sub_state} (result {self.result or 'n/a'}"
        if self.exec_main_code:
            text += f", main process {self.exec_main_code} with status {self.exec_main_status}"
        return text + ")"


def parse_show(text: str) -> dict[str, str]:
    """``Key=Value`` lines of ``systemctl show`` into a dict (values may contain '=')."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def _int_or(value: str | None, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def unit_state_from_props(unit: str, props: dict[str, str]) -> UnitState:
    code = EXIT_CODES.get(props.get("ExecMainCode", "0"), props.get("ExecMainCode", ""))
    status_raw = props.get("ExecMainStatus", "")
    return UnitState(
        unit=props.get("Id") or unit,
        load_state=props.get("LoadState", ""),
        active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""),
        result=props.get("Result", ""),
        invocation_id=props.get("InvocationID", ""),
        main_pid=_int_or(props.get("MainPID"), 0),
        exec_main_code=code,
        exec_main_status=_int_or(status_raw, 0) if code else None,
        exec_main_start_monotonic_us=_int_or(props.get("ExecMainStartTimestampMonotonic"), 0),
        exec_main_exit_monotonic_us=_int_or(props.get("ExecMainExitTimestampMonotonic"), 0),
    )


def show_argv(unit: str) -> list[str]:
    return ["systemctl", "show", "--no-pager", "-p", ",".join(SHOW_PROPERTIES), unit]


def read_unit_state(unit: str, runner: Runner = run_command) -> UnitState:
    rc, out, err = runner(show_argv(unit))
    if rc != 0:
        raise RuntimeError(f"systemctl show {unit} failed (rc={rc}): {err.strip() or out.strip()}")
    return unit_state_from_props(unit, parse_show(out))


# ----------------------------------------------------------------------------------- journal


def journal_argv(invocation_id: str) -> list[str]:
    """Every journal entry of one start of a unit: the service's own output
    (``_SYSTEMD_INVOCATION_ID``) and systemd's messages about it (``INVOCATION_ID``)."""
    return [
        "journalctl",
        "--no-pager",
        "--output=json",
        "--all",
        f"_SYSTEMD_INVOCATION_ID={invocation_id}",
        "+",
        f"INVOCATION_ID={invocation_id}",
    ]


@dataclass(frozen=True)
class JournalEntry:
    realtime_us: int
    identifier: str
    pid: str
    message: str

    def timestamp(self) -> str:
        when = datetime.fromtimestamp(self.realtime_us / 1e6, tz=timezone.utc)
        return when.isoformat(timespec="microseconds")

    def line(self) -> str:
        who = self.identifier + (f"[{self.pid}]" if self.pid else "")
        return f"{self.timestamp()} {who}: {self.message}"


def _message(raw: Any) -> str:
    if isinstance(raw, list):  # non-UTF-8 messages come as byte arrays
        return bytes(int(b) & 0xFF for b in raw).decode("utf-8", errors="replace")
    return "" if raw is None else str(raw)


def parse_journal_json(text: str) -> list[JournalEntry]:
    """``journalctl --output=json`` lines into entries, oldest first; bad lines are skipped."""
    entries: list[JournalEntry] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        entries.append(
            JournalEntry(
                realtime_us=_int_or(rec.get("__REALTIME_TIMESTAMP"), 0),
                identifier=str(rec.get("SYSLOG_IDENTIFIER") or rec.get("_COMM") or "?"),
                pid=str(rec.get("_PID") or ""),
                message=_message(rec.get("MESSAGE")),
            )
        )
    entries.sort(key=lambda e: e.realtime_us)
    return entries


def render_journal(entries: Sequence[JournalEntry]) -> str:
    """Human-readable journal text (ISO timestamp, identifier[pid]: message), one entry per line."""
    return "".join(e.line() + "\n" for e in entries)


def messages_text(entries: Sequence[JournalEntry]) -> str:
    """Only the messages, one per line: the input SGLang's log parsers expect."""
    return "".join(e.message + "\n" for e in entries)


def first_entry_time(entries: Sequence[JournalEntry], needle: str) -> int | None:
    """Realtime (µs) of the first entry whose message contains ``needle``."""
    for entry in entries:
        if needle in entry.message:
            return entry.realtime_us
    return None


def read_start_journal(
    invocation_id: str,
    runner: Runner = run_command,
    settle_s: float = 0.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> list[JournalEntry]:
    """Every entry of one start (after ``journalctl --sync``). With ``settle_s`` > 0 (a process that just
    exited may still have lines on their way), read until two reads agree, for up to ``settle_s``
    seconds (``clock`` and ``sleep`` default to the monotonic clock and ``time.sleep``). Raises
    RuntimeError naming the invocation when journalctl fails."""
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    runner(["journalctl", "--sync"])
    deadline = clock() + settle_s
    previous = -1
    while True:
        rc, out, err = runner(journal_argv(invocation_id))
        if rc != 0:
            raise RuntimeError(f"journalctl failed for invocation {invocation_id} (rc={rc}): {err.strip()}")
        entries = parse_journal_json(out)
        if settle_s <= 0 or len(entries) == previous or clock() >= deadline:
            return entries
        previous = len(entries)
        sleep(0.2)


def redact_entries(entries: Sequence[JournalEntry], secrets: Sequence[str]) -> list[JournalEntry]:
    """The entries with every secret string replaced by ``<redacted>``."""
    secrets = [s for s in secrets if s]
    if not secrets:
        return list(entries)
    out = []
    for entry in entries:
        message = entry.message
        for secret in secrets:
            message = message.replace(secret, "<redacted>")
        out.append(JournalEntry(entry.realtime_us, entry.identifier, entry.pid, message))
    return out
