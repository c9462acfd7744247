"""Controller-side Jinja filters for the SGLang matrix: validation, instances, ExecStart quoting.

Pure functions over the standard library and the checkout's ``sglbench.hostlib.sglang_facts`` (the
speculative-algorithm table, itself stdlib only), so ``ansible-playbook`` never needs the
``sglbench`` package installed. Used by the ``sglang_preflight`` and ``sglang_units`` roles;
tested in ``tests/plugins/filter/test_sglbench_filter.py``.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench import secretcheck  # noqa: E402  (stdlib only: what counts as a secret)
from sglbench.hostlib import sglang_catalog, sglang_facts  # noqa: E402

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
    "config": "the matrix (a --config file could set any of the fields above)",
}
# Environment variables sglbench sets itself: a config overriding them would move the server off the GPUs
# its record names, or put a secret into a world-readable unit file.
RESERVED_ENV = {
    "CUDA_VISIBLE_DEVICES": "the TP size (sglbench gives each config the first TP GPUs of sglbench_gpu_ids)",
    "NVIDIA_VISIBLE_DEVICES": "the TP size",
    "HIP_VISIBLE_DEVICES": "the TP size",
    "ROCR_VISIBLE_DEVICES": "the TP size",
    "SGLBENCH_API_KEY": "sglbench_api_key (kept in the 0600 secrets file)",
}
PORT_RANGE = (1024, 65535)
PYTHON_RE = re.compile(r"^/[A-Za-z0-9_+=:,./-]+$")
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


@functools.lru_cache(maxsize=1)
def newest_catalog() -> Any:
    """The newest shipped SGLang flag catalog (prefix abbreviations resolve against it), or None."""
    try:
        return sglang_catalog.load(sglang_catalog.releases()[-1])
    except (IndexError, sglang_catalog.CatalogError, OSError):
        return None


def _reserved_for(option: str) -> tuple[str, str] | None:
    """``(flag, field)`` when ``option`` (possibly abbreviated, ``--po``) selects a flag sglbench sets
    itself; None otherwise. SGLang's argparse accepts any unambiguous prefix of a flag."""
    flag = option.split("=", 1)[0]
    if not flag.startswith("--"):
        return None
    catalog = newest_catalog()
    matches = catalog.match(flag) if catalog is not None else []
    if catalog is not None:
        # An ambiguous prefix is left to the flag check (SGLang rejects it); one match is what runs.
        dests = [(m, catalog.by_option[m].dest) for m in matches] if len(matches) == 1 else []
    else:  # no catalog: the reserved fields' own spellings, and prefixes of them
        dests = [
            ("--" + k.replace("_", "-"), k)
            for k in RESERVED_ARGS
            if ("--" + k.replace("_", "-")).startswith(flag)
        ]
    if flag == "--" + flag[2:] and flag[2:].replace("-", "_") in RESERVED_ARGS:
        dests.append((flag, flag[2:].replace("-", "_")))
    for match, dest in dests:
        if dest in RESERVED_ARGS:
            return match, RESERVED_ARGS[dest]
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
        if not isinstance(draft, str):
            err("draft_model_path", f"{draft!r} must be a path (a string)")
            draft = str(draft)
        if algorithm in DRAFT_ALGORITHMS and not draft:
            err("draft_model_path", f"required for algorithm {algorithm} (the draft model directory)")
        if algorithm in NO_DRAFT_ALGORITHMS and draft:
            err("draft_model_path", f"given but algorithm {algorithm} uses no draft model; remove it")
        tps = cfg.get("tp")
        if tps is None or tps == []:
            err("tp", "required: a non-empty list of TP sizes, e.g. [1, 4, 8]")
        elif not isinstance(tps, list):
            err("tp", f"{tps!r} must be a list of TP sizes, e.g. [{tps}] (one TP size is still a list)")
        else:
            for tp in tps:
                tpi = _as_int(tp) if not isinstance(tp, str) or tp.strip() == str(_as_int(tp)) else None
                if tpi is None or tpi < 1:
                    err("tp", f"{tp!r} is not a positive integer (write TP sizes as plain numbers: 1, 4, 8)")
                elif gpus and (tpi > gpus or gpus % tpi):
                    err("tp", f"{tpi} does not divide the host's {gpus} GPUs; use a divisor of {gpus}")
            ints = [_as_int(t) for t in tps]
            if len(set(ints)) != len(ints):
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
            elif (hit := _reserved_for("--" + key.replace("_", "-"))) is not None:
                err(
                    f"args.{key}", f"selects SGLang's {hit[0]} (abbreviated), set through {hit[1]}; remove it"
                )
            if secretcheck.secret_name(key) or secretcheck.secret_value(value):
                err(
                    f"args.{key}",
                    "looks like a secret: it would be in the server's argv (ps) and the 0644 unit",
                )
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
        for problem in env_errors(env):
            err(*problem)
        extra = cfg.get("extra_args", [])
        if not isinstance(extra, list) or not all(isinstance(a, (str, int, float)) for a in extra):
            err("extra_args", "must be a list of strings (raw launch_server arguments)")
            extra = []
        for word in (str(a) for a in extra):
            if (hit := _reserved_for(word)) is not None:
                shown = word.split("=", 1)[0]
                how = "" if shown == hit[0] else f" ({shown} abbreviates {hit[0]})"
                err("extra_args", f"{shown} is set through {hit[1]}{how}; remove it from extra_args")
            elif word.startswith("-") and secretcheck.secret_name(word.lstrip("-").split("=", 1)[0]):
                err(
                    "extra_args",
                    f"{word.split('=', 1)[0]} looks like a secret option: it would be in argv (ps)",
                )
            elif secretcheck.secret_value(word) or secretcheck.secret_value(word.split("=", 1)[-1]):
                err(
                    "extra_args",
                    "a value looks like a credential: it would be in argv (ps) and the 0644 unit",
                )
        if "enabled" in cfg and not isinstance(cfg["enabled"], bool):
            err("enabled", f"{cfg['enabled']!r} must be true or false")
    base = _as_int(port_base)
    if base is None:
        errors.append(f"sglbench_port_base: {port_base!r} is not an integer (the first server port)")
        return errors
    ports = config_ports([c if isinstance(c, dict) else {} for c in matrix], base)
    by_port: dict[int, str] = {}
    for i, (cfg, port) in enumerate(zip(matrix, ports, strict=True)):
        if not isinstance(cfg, dict) or port is None:
            continue
        name = cfg.get("name")
        low, high = PORT_RANGE
        if cfg.get("port") in (None, "") and not low <= port <= high:
            errors.append(
                f"config {name!r}: field 'port': not set, so sglbench_port_base {base} + position {i} = "
                f"{port}, outside {low}..{high}; set port, or change sglbench_port_base"
            )
            continue
        if port in by_port:
            errors.append(f"config {name!r}: field 'port': {port} is also used by config {by_port[port]!r}")
        else:
            by_port[port] = str(name)
    return errors


def env_errors(env: Any, where: str = "env") -> list[tuple[str, str]]:
    """``(field, problem)`` for an environment mapping: names, secrets, variables sglbench sets itself."""
    if not isinstance(env, dict):
        return [(where, "must be a mapping of environment variable names to values")]
    out: list[tuple[str, str]] = []
    for key, value in env.items():
        field = f"{where}.{key}"
        if not isinstance(key, str) or not ENV_RE.match(key):
            out.append((field, "not a valid environment variable name"))
        elif key in RESERVED_ENV:
            out.append((field, f"set by sglbench from {RESERVED_ENV[key]}; remove it"))
        elif secretcheck.secret_name(key) or SECRET_ENV_RE.search(key) or secretcheck.secret_value(value):
            out.append(
                (
                    field,
                    "looks like a secret: it would be in a world-readable unit file and the records; set "
                    "the API key with sglbench_api_key, a Hugging Face token with sglbench_hf_token",
                )
            )
        if isinstance(value, (dict, list)):
            out.append((field, "values must be scalars"))
    return out


def host_errors(python: Any, unit_environment: Any = None) -> list[str]:
    """Problems with the host-level variables the units are built from."""
    errors: list[str] = []
    if not isinstance(python, str) or not PYTHON_RE.match(python):
        errors.append(
            f"sglbench_sglang_python: {python!r} must be an absolute path to the interpreter, e.g. "
            "/opt/sglang/.venv/bin/python (no spaces; a leading '-' or '@' would change what systemd runs)"
        )
    for field, problem in env_errors(unit_environment or {}, "sglbench_unit_environment"):
        errors.append(f"{field}: {problem}")
    return errors


def _tp_sizes(cfg: Any) -> list[int]:
    tps = cfg.get("tp") if isinstance(cfg, dict) else None
    if not isinstance(tps, list):
        return []
    return [t for t in (_as_int(x) for x in tps) if t is not None]


def tp_phases(matrix: list[dict[str, Any]], tp: Any, order: list[int] | None = None) -> list[int]:
    """TP sizes to run for ``tp``: ``all`` = every TP size in the matrix, in ``order`` then ascending."""
    present = sorted(
        {t for c in matrix if isinstance(c, dict) and c.get("enabled", True) for t in _tp_sizes(c)}
    )
    if str(tp).strip().lower() == "all":
        first = [t for t in (order or []) if t in present]
        return first + [t for t in present if t not in first]
    return [int(str(tp).strip())]


def tp_errors(matrix: list[dict[str, Any]], tp: Any) -> list[str]:
    """Problems with the requested ``tp`` (``-e tp=N``)."""
    text = str(tp).strip()
    if text.lower() != "all" and not text.isdigit():
        return [f"tp: {tp!r} must be a TP size such as 1, 4, 8, or 'all'"]
    if not isinstance(matrix, list):
        return []
    present = sorted(
        {t for c in matrix if isinstance(c, dict) and c.get("enabled", True) for t in _tp_sizes(c)}
    )
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


DEFAULT_LAUNCHER = "/usr/local/libexec/sglbench-launch"


def systemd_exec(argv: list[str], api_key_env: str = "", launcher: str = DEFAULT_LAUNCHER) -> str:
    """ExecStart= value: each word quoted (no expansion, no specifiers, no ``-``/``@`` prefixes).

    With ``api_key_env`` the server runs under ``launcher`` (roles/sglang_units/files/sglbench-launch):
    it takes the key from that environment variable (set from the 0600 EnvironmentFile) and gives it to
    SGLang inside the process, so the key is in neither the unit file, nor the server's argv (``ps``,
    ``systemctl status``), nor its journal (the launcher redacts SGLang's ``server_args=`` line)."""
    if api_key_env:
        argv = [argv[0], launcher, "--key-env", api_key_env, "--", *argv]
    return " ".join(systemd_quote(w) for w in argv)


def instances(matrix: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (enabled config, TP size): what the units role renders and the cycle runs.

    ``settings``: ``python``, ``host``, ``port_base``, ``gpu_ids`` (host GPU indices, in order),
    ``unit_prefix`` (default ``sglang-``), ``enable_metrics`` (add ``--enable-metrics`` to a launch line
    that lacks it; the instance lists what was added in ``added_flags``).
    """
    prefix = settings.get("unit_prefix", "sglang-")
    gpu_ids = [int(g) for g in settings.get("gpu_ids", [])]
    ports = config_ports(matrix, int(settings.get("port_base", 30000)))
    out: list[dict[str, Any]] = []
    for cfg, port in zip(matrix, ports, strict=True):
        if not cfg.get("enabled", True):
            continue
        added = [METRICS_FLAG] if settings.get("enable_metrics") and not _has_metrics(cfg) else []
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
                    "argv": launch_argv(cfg, tpi, {**settings, "port": port}) + added,
                    "added_flags": list(added),
                }
            )
    return out


METRICS_FLAG = "--enable-metrics"


def _has_metrics(cfg: dict[str, Any]) -> bool:
    """Whether the config's own launch line turns ``/metrics`` on (its args or extra args)."""
    args = cfg.get("args") or {}
    value = args.get("enable_metrics", args.get("enable-metrics"))
    return value not in (None, False, "false", "False") or METRICS_FLAG in [
        str(a) for a in cfg.get("extra_args") or []
    ]


def telemetry(settings: Any, instance: dict[str, Any], version: Any = None) -> dict[str, Any]:
    """The ``telemetry`` option of ``sglbench_prompt_bench`` for one instance, from the bench setting
    ``telemetry`` (roles/sglang_cycle defaults): the instance's GPUs, ``/metrics`` when ``metrics`` is on
    or ``auto`` and the launch line has ``--enable-metrics``, the load endpoint of the serving SGLang
    ``version`` (``sglang_facts.load_endpoint``; the newest releases' one when unknown)."""
    s = dict(settings) if isinstance(settings, dict) else {}
    metrics = str(s.get("metrics", "auto")).lower()
    argv = [str(a) for a in instance.get("argv") or []]
    on = metrics in ("on", "true", "yes") or (metrics == "auto" and "--enable-metrics" in argv)
    off = (False, "false", "off", "no", "False")
    want_load = s.get("load_endpoint", True) not in off
    return {
        "enabled": s.get("enabled", True) not in off,
        "gpus": [int(g) for g in instance.get("gpus") or []],
        "gpu_interval_ms": int(s.get("gpu_interval_ms", 200)),
        "server_interval_ms": int(s.get("server_interval_ms", 1000)),
        "metrics": on,
        "load_endpoint": sglang_facts.load_endpoint(str(version) if version else None) if want_load else None,
        "nvidia_smi": str(s.get("nvidia_smi") or "nvidia-smi"),
    }


def baseline_instance(
    instances: list[dict[str, Any]], instance: dict[str, Any], configs: Any = None
) -> str | None:
    """The name (``<config>-tp<N>``) of the instance a speculative ``instance`` is compared with: the
    alphabetically first ``algorithm: none`` config of the run (``configs``: the selected config names, empty
    = all) on the same model and TP size, as the break-even map picks it (docs/deploy.md). None for a
    baseline itself, or when the run has none."""
    if str(instance.get("algorithm") or sglang_facts.NO_SPEC).lower() in (sglang_facts.NO_SPEC.lower(), ""):
        return None
    chosen = set(configs) if isinstance(configs, list) and configs else None
    candidates = sorted(
        (
            i
            for i in instances
            if str(i.get("algorithm") or sglang_facts.NO_SPEC).lower() in (sglang_facts.NO_SPEC.lower(), "")
            and i.get("tp") == instance.get("tp")
            and i.get("model_path") == instance.get("model_path")
            and (chosen is None or i.get("config") in chosen)
        ),
        key=lambda i: str(i.get("config")),
    )
    return str(candidates[0]["name"]) if candidates else None


def configs_errors(configs: Any, matrix: Any, tp: Any = "all") -> list[str]:
    """``--configs`` / ``sglang_cycle_configs`` naming configs the matrix lacks (or that will not run)."""
    if not configs:
        return []
    if not isinstance(configs, list):
        return [f"configs: {configs!r} must be a list of config names"]
    cfgs = {c.get("name"): c for c in matrix if isinstance(c, dict)} if isinstance(matrix, list) else {}
    errors: list[str] = []
    text = str(tp).strip().lower()
    for name in configs:
        cfg = cfgs.get(name)
        if cfg is None:
            known = ", ".join(sorted(str(n) for n in cfgs)) or "none"
            errors.append(f"configs: {name!r} is not a config of sglbench_matrix (configs: {known})")
        elif not cfg.get("enabled", True):
            errors.append(f"configs: {name!r} is disabled in sglbench_matrix (enabled: false)")
        elif text.isdigit() and int(text) not in _tp_sizes(cfg):
            errors.append(f"configs: {name!r} has no TP {text} (its TP sizes: {_tp_sizes(cfg)})")
    return errors


def secret_argv(argv: Any) -> list[str]:
    """The words of a command line that look like (or carry) a secret, redacted: empty when clean."""
    words = [str(w) for w in argv] if isinstance(argv, list) else []
    return [r for w, r in zip(words, secretcheck.redact_argv(words), strict=True) if w != r]


def failure_summary(outcomes: list[dict[str, Any]], host: str, records: str = "") -> str:
    """One line for the end of the play: which config attempts failed, in which phase, why."""
    failed = [o for o in outcomes if isinstance(o, dict) and o.get("outcome") == "failed"]
    items = ", ".join(
        f"{o.get('instance')} ({o.get('phase') or '?'}: {o.get('cause') or 'unknown'})" for o in failed
    )
    where = f"; records in {records}" if records else ""
    return (
        f"{len(failed)} of {len(outcomes)} config attempts failed on {host}: {items} "
        f"(every other config ran and every GPU was freed{where})"
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglbench_matrix_errors": matrix_errors,
            "sglbench_host_errors": host_errors,
            "sglbench_configs_errors": configs_errors,
            "sglbench_tp_errors": tp_errors,
            "sglbench_tp_phases": tp_phases,
            "sglbench_instances": instances,
            "sglbench_baseline_instance": baseline_instance,
            "sglbench_telemetry": telemetry,
            "sglbench_launch_argv": launch_argv,
            "sglbench_systemd_exec": systemd_exec,
            "sglbench_systemd_quote": systemd_quote,
            "sglbench_systemd_env": systemd_env,
            "sglbench_env_file_line": env_file_line,
            "sglbench_failure_summary": failure_summary,
            "sglbench_secret_paths": secretcheck.secret_paths,
            "sglbench_secret_argv": secret_argv,
        }
