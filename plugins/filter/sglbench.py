"""Controller-side Jinja filters for the SGLang matrix: validation, instances, ExecStart quoting.

Pure functions over the standard library and the checkout's ``sglbench.hostlib.sglang_facts`` (the
speculative-algorithm table, itself stdlib only), so ``ansible-playbook`` never needs the
``sglbench`` package installed. Used by the ``sglang_preflight`` and ``sglang_units`` roles;
tested in ``tests/plugins/filter/test_sglbench_filter.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench.hostlib import sglang_facts  # noqa: E402

ALGORITHMS = sglang_facts.MATRIX_ALGORITHMS
DRAFT_ALGORITHMS = tuple(a.name for a in sglang_facts.SPEC_TABLE if a.needs_draft_model)
# Algorithms that take no draft checkpoint at all (a draft_model_path given for them is a mistake).
NO_DRAFT_ALGORITHMS = (
    sglang_facts.NO_SPEC,
    *(a.name for a in sglang_facts.SPEC_TABLE if not a.uses_draft_model),
)
CONFIG_KEYS = (
    "name",
    "model_path",
    "algorithm",
    "draft_model_path",
    "tp",
    "port",
    "args",
    "env",
    "extra_args",
    "enabled",
)
# Set by dedicated config fields or by the roles; never through `args`.
RESERVED_ARGS = {
    "model_path": "model_path",
    "tp_size": "tp",
    "tp": "tp",
    "tensor_parallel_size": "tp",
    "host": "sglang_units_host",
    "port": "port",
    "speculative_algorithm": "algorithm",
    "speculative_draft_model_path": "draft_model_path",
    "speculative_draft_model": "draft_model_path",
    "api_key": "sglang_units_api_key (kept in the 0600 secrets file)",
    "admin_api_key": "sglang_units_api_key",
}
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ARG_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")
SECRET_ENV_RE = re.compile(r"(TOKEN|API_KEY|SECRET|PASSWORD)", re.IGNORECASE)
RANGES = {
    "mem_fraction_static": (0.0, 1.0, False),  # (low, high, inclusive)
    "max_running_requests": (1, 1 << 20, True),
    "context_length": (1, 1 << 24, True),
    "max_total_tokens": (1, 1 << 30, True),
    "speculative_ddtree_budget": (1, 4096, True),
    "speculative_dflash_block_size": (1, 256, True),
    "speculative_num_draft_tokens": (1, 256, True),
    "speculative_num_steps": (1, 64, True),
    "speculative_eagle_topk": (1, 64, True),
    "page_size": (1, 4096, True),
    "cuda_graph_max_bs": (1, 4096, True),
}
SAFE_WORD_RE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value: Any) -> int | None:
    if _is_int(value):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def config_ports(matrix: list[dict[str, Any]], port_base: int) -> list[int]:
    """The port of each config: its ``port`` field, else ``port_base + position``."""
    return [
        _as_int(c.get("port")) if c.get("port") not in (None, "") else port_base + i  # type: ignore[misc]
        for i, c in enumerate(matrix)
    ]


def matrix_errors(matrix: Any, gpu_count: Any, port_base: int = 30000) -> list[str]:
    """Every problem with the matrix, each naming the config and the field, with the fix."""
    if not isinstance(matrix, list) or not matrix:
        return ["sglbench_matrix: must be a non-empty list of configs"]
    gpus = _as_int(gpu_count)
    errors: list[str] = []
    if gpus is None or gpus < 1:
        errors.append(f"sglbench_gpu_count: {gpu_count!r} is not a positive integer (GPUs on the host)")
    seen_names: dict[str, int] = {}
    for i, cfg in enumerate(matrix):
        if not isinstance(cfg, dict):
            errors.append(f"sglbench_matrix[{i}]: must be a mapping with at least name, model_path and tp")
            continue
        name = cfg.get("name")
        who = f"config {name!r}" if isinstance(name, str) and name else f"sglbench_matrix[{i}]"

        def err(field: str, problem: str, who: str = who) -> None:
            errors.append(f"{who}: field '{field}': {problem}")

        for key in cfg:
            if key not in CONFIG_KEYS:
                err(str(key), f"unknown field; allowed fields are {', '.join(CONFIG_KEYS)}")
        if not isinstance(name, str) or not NAME_RE.match(name):
            err("name", f"{name!r} must match {NAME_RE.pattern} (lowercase letters, digits, . _ -)")
        elif name in seen_names:
            err("name", f"duplicate of sglbench_matrix[{seen_names[name]}]; names must be unique")
        else:
            seen_names[name] = i
        if not isinstance(cfg.get("model_path"), str) or not cfg.get("model_path"):
            err("model_path", "required: the model directory on the GPU host")
        algorithm = cfg.get("algorithm", sglang_facts.NO_SPEC)
        if algorithm not in ALGORITHMS:
            err("algorithm", f"{algorithm!r} is not one of {', '.join(ALGORITHMS)}")
        draft = cfg.get("draft_model_path") or ""
        if algorithm in DRAFT_ALGORITHMS and not draft:
            err("draft_model_path", f"required for algorithm {algorithm} (the draft model directory)")
        if algorithm in NO_DRAFT_ALGORITHMS and draft:
            err("draft_model_path", f"given but algorithm {algorithm} uses no draft model; remove it")
        tps = cfg.get("tp")
        if not isinstance(tps, list) or not tps:
            err("tp", "required: a non-empty list of TP sizes, e.g. [1, 4, 8]")
        else:
            for tp in tps:
                tpi = _as_int(tp)
                if tpi is None or tpi < 1:
                    err("tp", f"{tp!r} is not a positive integer")
                elif gpus and (tpi > gpus or gpus % tpi):
                    err("tp", f"{tpi} does not divide the host's {gpus} GPUs; use a divisor of {gpus}")
            if len({str(t) for t in tps}) != len(tps):
                err("tp", f"{tps} lists a TP size twice")
        port = cfg.get("port")
        if port not in (None, ""):
            porti = _as_int(port)
            if porti is None or not 1024 <= porti <= 65535:
                err("port", f"{port!r} must be an integer in 1024..65535")
        args = cfg.get("args", {})
        if not isinstance(args, dict):
            err("args", "must be a mapping of SGLang server-arg names to values")
            args = {}
        for key, value in args.items():
            if not isinstance(key, str) or not ARG_RE.match(key):
                err(
                    f"args.{key}",
                    "SGLang arg names are snake_case ServerArgs fields, e.g. mem_fraction_static",
                )
                continue
            if key in RESERVED_ARGS:
                err(f"args.{key}", f"set through {RESERVED_ARGS[key]} instead of args")
            if key in RANGES and value is not None:
                low, high, inclusive = RANGES[key]
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                ok = ok and (low <= value <= high if inclusive else low < value < high)
                if not ok:
                    bounds = f"[{low}, {high}]" if inclusive else f"({low}, {high})"
                    err(f"args.{key}", f"{value!r} is out of range {bounds}")
            if isinstance(value, (dict,)):
                err(f"args.{key}", "nested mappings are not SGLang flags; use a scalar or a list")
        env = cfg.get("env", {})
        if not isinstance(env, dict):
            err("env", "must be a mapping of environment variable names to values")
            env = {}
        for key, value in env.items():
            if not isinstance(key, str) or not ENV_RE.match(key):
                err(f"env.{key}", "not a valid environment variable name")
            elif SECRET_ENV_RE.search(key):
                err(
                    f"env.{key}",
                    "looks like a secret; set it via sglang_units_api_key / sglang_units_hf_token",
                )
            if isinstance(value, (dict, list)):
                err(f"env.{key}", "values must be scalars")
        extra = cfg.get("extra_args", [])
        if not isinstance(extra, list) or not all(isinstance(a, (str, int, float)) for a in extra):
            err("extra_args", "must be a list of strings (raw launch_server arguments)")
        if "enabled" in cfg and not isinstance(cfg["enabled"], bool):
            err("enabled", f"{cfg['enabled']!r} must be true or false")
    ports = config_ports([c if isinstance(c, dict) else {} for c in matrix], port_base)
    by_port: dict[int, str] = {}
    for cfg, port in zip(matrix, ports, strict=True):
        if not isinstance(cfg, dict) or port is None:
            continue
        name = cfg.get("name")
        if port in by_port:
            errors.append(f"config {name!r}: field 'port': {port} is also used by config {by_port[port]!r}")
        else:
            by_port[port] = str(name)
    return errors


def tp_phases(matrix: list[dict[str, Any]], tp: Any, order: list[int] | None = None) -> list[int]:
    """TP sizes to run for ``tp``: ``all`` = every TP size in the matrix, in ``order`` then ascending."""
    present = sorted({int(t) for c in matrix if c.get("enabled", True) for t in c.get("tp", [])})
    if str(tp).strip().lower() == "all":
        first = [t for t in (order or []) if t in present]
        return first + [t for t in present if t not in first]
    return [int(str(tp).strip())]


def tp_errors(matrix: list[dict[str, Any]], tp: Any) -> list[str]:
    """Problems with the requested ``tp`` (``-e tp=N``)."""
    text = str(tp).strip()
    if text.lower() != "all" and not text.isdigit():
        return [f"tp: {tp!r} must be a TP size such as 1, 4, 8, or 'all'"]
    present = sorted({int(t) for c in matrix if c.get("enabled", True) for t in c.get("tp", [])})
    if text.lower() != "all" and int(text) not in present:
        return [f"tp: {text} is not a TP size of any enabled config in sglbench_matrix (present: {present})"]
    return []


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _arg_words(key: str, value: Any) -> list[str]:
    if value is None or value is False:
        return []
    if value is True:
        return [_flag(key)]
    if isinstance(value, list):
        return [_flag(key), *[str(v) for v in value]]
    return [_flag(key), str(value)]


def launch_argv(cfg: dict[str, Any], tp: int, settings: dict[str, Any]) -> list[str]:
    """The exact ``python -m sglang.launch_server ...`` argument list for one config at one TP size.

    ``settings``: ``python`` (interpreter), ``host``, ``port`` (this config's port). The API key is
    not part of it (see :func:`systemd_exec`).
    """
    argv = [
        str(settings["python"]),
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(cfg["model_path"]),
        "--tp-size",
        str(int(tp)),
        "--host",
        str(settings.get("host", "127.0.0.1")),
        "--port",
        str(int(settings["port"])),
    ]
    algorithm = cfg.get("algorithm", sglang_facts.NO_SPEC)
    if algorithm and algorithm != sglang_facts.NO_SPEC:
        argv += ["--speculative-algorithm", str(algorithm)]
        if cfg.get("draft_model_path"):
            argv += ["--speculative-draft-model-path", str(cfg["draft_model_path"])]
    for key, value in (cfg.get("args") or {}).items():
        argv += _arg_words(key, value)
    argv += [str(a) for a in cfg.get("extra_args") or []]
    return argv


def systemd_quote(word: str) -> str:
    """Quote one argument for an ExecStart= line: no variable expansion, no specifiers, no splitting."""
    word = str(word)
    if SAFE_WORD_RE.match(word):
        return word
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def systemd_env(key: str, value: Any) -> str:
    """One ``Environment=`` assignment, quoted (specifiers escaped; ``$`` is literal there)."""
    text = f"{key}={value}"
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("%", "%%")
    return '"' + escaped + '"'


def env_file_line(key: str, value: Any) -> str:
    """One ``KEY="value"`` line of an EnvironmentFile (double-quoted, backslash-escaped)."""
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("\n", "\\n")
    return f'{key}="{escaped}"'


def systemd_exec(argv: list[str], api_key_env: str = "") -> str:
    """ExecStart= value: each word quoted; with ``api_key_env`` the key comes from that environment
    variable (set in the 0600 EnvironmentFile), so it never appears in the unit file."""
    words = [systemd_quote(w) for w in argv]
    if api_key_env:
        words += ["--api-key", "${" + api_key_env + "}"]
    return " ".join(words)


def instances(matrix: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (enabled config, TP size): what the units role renders and the cycle runs.

    ``settings``: ``python``, ``host``, ``port_base``, ``gpu_ids`` (host GPU indices, in order),
    ``unit_prefix`` (default ``sglang-``).
    """
    prefix = settings.get("unit_prefix", "sglang-")
    gpu_ids = [int(g) for g in settings.get("gpu_ids", [])]
    ports = config_ports(matrix, int(settings.get("port_base", 30000)))
    out: list[dict[str, Any]] = []
    for cfg, port in zip(matrix, ports, strict=True):
        if not cfg.get("enabled", True):
            continue
        for tp in cfg["tp"]:
            tpi = int(tp)
            name = f"{cfg['name']}-tp{tpi}"
            gpus = gpu_ids[:tpi]
            out.append(
                {
                    "name": name,
                    "config": cfg["name"],
                    "tp": tpi,
                    "unit": f"{prefix}{name}.service",
                    "port": port,
                    "gpus": gpus,
                    "cuda_visible_devices": ",".join(str(g) for g in gpus),
                    "algorithm": cfg.get("algorithm", sglang_facts.NO_SPEC),
                    "model_path": cfg["model_path"],
                    "draft_model_path": cfg.get("draft_model_path") or None,
                    "args": dict(cfg.get("args") or {}),
                    "extra_args": [str(a) for a in cfg.get("extra_args") or []],
                    "env": {str(k): str(v) for k, v in (cfg.get("env") or {}).items()},
                    "argv": launch_argv(cfg, tpi, {**settings, "port": port}),
                }
            )
    return out


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglbench_matrix_errors": matrix_errors,
            "sglbench_tp_errors": tp_errors,
            "sglbench_tp_phases": tp_phases,
            "sglbench_instances": instances,
            "sglbench_launch_argv": launch_argv,
            "sglbench_systemd_exec": systemd_exec,
            "sglbench_systemd_quote": systemd_quote,
            "sglbench_systemd_env": systemd_env,
            "sglbench_env_file_line": env_file_line,
        }
