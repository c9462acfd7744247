#!/usr/bin/python
"""Ansible module: plan one SGLang config on the GPU host before it starts, and apply the run's policy."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_plan
short_description: Predict an SGLang config's KV capacity on the GPU host and decide whether to start it
description:
  - Runs the sglbench capacity planner (module_utils C(sglbench_capacity), the same code as C(sglbench plan))
    on the GPU host for one config, from the real inputs there, before the server starts.
  - Inputs read on the host - the target and draft C(config.json) and checkpoint size on disk (from the
    C(--model-path) / C(--speculative-draft-model-path) of I(argv); a Hugging Face hub id such as C(org/name)
    is read from its snapshot in the Hugging Face cache that I(environment) selects - C(HF_HUB_CACHE),
    C(HUGGINGFACE_HUB_CACHE), C(HF_HOME), C(XDG_CACHE_HOME), else the module's own environment - at
    C(--revision) / C(--speculative-draft-model-revision); never downloaded), the GPUs' memory from
    C(nvidia-smi --query-gpu=index,memory.total,memory.used,memory.free) (the smallest figure over I(gpus)),
    and the installed SGLang, found by running I(sglang_python) with I(environment) (the unit's environment).
  - The accounting variant is, in order, I(accounting), the C(sglang.__sglbench_accounting__) marker (set only
    by the sim host's stand-in package), the markers of the installed C(srt) source tree, the version.
  - The free memory SGLang will measure is the smallest C(memory.free) minus a CUDA-context overhead
    (I(context_overhead_gib), default the planner's constant, +0.5 GiB at TP > 1). Memory held by compute
    processes whose command line contains I(reclaim_match) counts as free - the stop phase, which runs after
    the plan and before the start, kills them (C(sglbench_stop) C(kill_match)).
  - Applies I(policy) to a predicted failure - C(skip) (do not start; the plan carries the recommendations),
    C(autotune) (take the least disruptive recommendation within I(autotune_flags) and I(autotune_bounds),
    re-planned on the tuned command line, and return that command line), or C(force) (start anyway).
  - Read-only - never changes the host (the caller installs the tuned ExecStart). Works in check mode.
options:
  argv:
    description:
      - The exact command line of the unit's ExecStart, e.g. C([/usr/bin/python3, -m, sglang.launch_server,
        --model-path, /models/m, ...]). Words before the first C(--) flag are the interpreter and module.
    type: list
    elements: str
    required: true
  gpus:
    description: Host GPU indices this config runs on (its CUDA_VISIBLE_DEVICES).
    type: list
    elements: int
    required: true
  policy:
    description: What to do with a config predicted to fail.
    type: str
    choices: [skip, autotune, force]
    default: skip
  autotune_flags:
    description:
      - SGLang flags autotune may change (ServerArgs names or flag spellings). Default - every flag the
        planner recommends except C(--tp-size), C(--kv-cache-dtype) and C(--context-length).
    type: list
    elements: str
  autotune_bounds:
    description:
      - "Per flag bounds on tuned values, e.g.
        C({max_running_requests: {min: 4}, mem_fraction_static: {max: 0.88}}). Bounds on
        C(max_running_requests) and C(max_total_num_tokens) also apply to the tuned plan's results."
    type: dict
    default: {}
  sglang_python:
    description: >-
      Python that imports SGLang. Default - the first word of I(argv) when it is not a flag, else python3.
    type: str
  environment:
    description: >-
      Environment of the unit (e.g. C(SGLBENCH_SIM_ACCOUNTING) on a sim host) for the SGLang probe, and for
      the Hugging Face cache of hub-id model paths (C(HF_HUB_CACHE), C(HF_HOME), ...) over the module's own.
    type: dict
    default: {}
  sglang_flags:
    description:
      - The installed SGLang's launch flags as a catalog (schema sglbench.sglang_catalog/1), as read by
        C(sglbench_sglang_flags) in preflight. The command line is checked against that release; a flag
        it does not have fails the plan naming the release, the nearest flag and any rename.
      - Without it the command line is accepted when any catalogued release accepts it.
    type: dict
  sglang_flags_file:
    description:
      - The same catalog as a file on the host, the one C(sglbench_sglang_flags) cached there in preflight
        (its C(cache_file)). Saves carrying the catalog (tens of kilobytes) to the host with every plan.
      - A file that cannot be read or is not a catalog fails the plan naming it; run the play again from its
        preflight, which writes it again.
    type: path
  accounting:
    description: Force the accounting variant (A, B or C) instead of detecting it from the installed SGLang.
    type: str
    choices: [A, B, C]
  gpu_mem_gib:
    description: GPU capacity per GPU in GiB (default - the smallest C(memory.total) of I(gpus)).
    type: float
  free_gib:
    description: Free memory per GPU when SGLang starts, GiB (default - from nvidia-smi, see description).
    type: float
  context_overhead_gib:
    description: GiB the CUDA context takes before SGLang measures free memory (default - planner constant).
    type: float
  weights_gib:
    description: Per-rank target weight memory in GiB (default - from the checkpoint on disk).
    type: float
  draft_weights_gib:
    description: Per-rank draft weight memory in GiB (default - from the draft checkpoint on disk).
    type: float
  reclaim_match:
    description: >-
      Compute processes whose command line contains this are stopped before the start, so their memory counts
      as free (the stop phase's kill match). Empty - count every process as staying.
    type: str
    default: sglang
  nvidia_smi:
    description: nvidia-smi executable.
    type: str
    default: nvidia-smi
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: plan | Plan qwen27b-dflash-mrr8-tp1
  sglbench_plan:
    argv: "{{ sglang_cycle_instance.argv }}"
    gpus: "{{ sglang_cycle_instance.gpus }}"
    environment: "{{ sglbench_unit_environment | combine(sglang_cycle_instance.env) }}"
    policy: autotune
    autotune_bounds:
      max_running_requests: {min: 4}
  register: planned

- name: plan | Skip it
  ansible.builtin.set_fact:
    skip_reason: "{{ planned.reason }}"
  when: planned.action == 'skip'
"""

RETURN = r"""
plan:
  description: >-
    The planner's prediction (C(Plan.to_dict()), see docs/capacity.md) for the command line that will run -
    the tuned one when autotune changed it. Keys include max_total_num_tokens, max_running_requests,
    mamba_slots, kv_cache_gib, mem_fraction_static, accounting, fits, failure, recommendations.
  type: dict
  returned: success
  sample: {max_total_num_tokens: 13294, max_running_requests: 0, mamba_slots: 4, fits: false,
           failure: {kind: zero_requests, message: max_running_request is zero}}
action:
  description: C(start) or C(skip).
  type: str
  returned: success
policy:
  description: The policy applied.
  type: str
  returned: success
reason:
  description: One line - why skipped, forced or tuned (null when the config simply fits).
  type: str
  returned: success
tuned:
  description: Whether autotune changed the command line.
  type: bool
  returned: success
argv:
  description: The full command line to run (the input I(argv), or the tuned one).
  type: list
  elements: str
  returned: success
autotune:
  description: >-
    When autotune ran - flags changed, the recommendation taken, rejected recommendations with why, and the
    original (untuned) plan. Null otherwise.
  type: dict
  returned: success
inputs:
  description: >-
    What the plan was made from - gpus, total/used/free/reclaimable MiB per GPU (and which processes),
    gpu_mem_gib, free_gib, context_overhead_gib, and sglang (version, path, accounting, accounting_source,
    markers found).
  type: dict
  returned: success
models:
  description: >-
    Identity of the target and draft model directories (sha256 of config.json and friends, weight file
    names and sizes; for a cached hub id those of its snapshot plus C(hub) - id, revision, commit_hash) for
    the attempt's identity hash (docs/records.md, "Resumable results").
  type: dict
  returned: always
error:
  description: With policy force, why the config could not be planned (it is started anyway).
  type: str
  returned: when planning failed under policy force
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.capacity import PlanError, plan_command
from ansible.module_utils.sglbench_hostlib.gpus import context_overhead_gib
from ansible.module_utils.sglbench_hostlib.model_identity import models_identity
from ansible.module_utils.sglbench_hostlib.nvidia_smi import read_cmdline
from ansible.module_utils.sglbench_hostlib.plan_inputs import (
    PlanInputError,
    add_reclaimable,
    apps_argv,
    find_markers,
    free_gib_at_start,
    gpu_memory,
    parse_probe,
    probe_argv,
    resolve_accounting,
    smi_argv,
)
from ansible.module_utils.sglbench_hostlib.plan_policy import (
    DEFAULT_AUTOTUNE_FLAGS,
    PolicyError,
    decide,
    launch_flags,
)
from ansible.module_utils.sglbench_hostlib.sglang_args import SglangArgsError, parse_launch_args_or_raise
from ansible.module_utils.sglbench_hostlib.sglang_catalog import CatalogError, catalog_from_dict, load_file


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "gpus": {"type": "list", "elements": "int", "required": True},
            "policy": {"type": "str", "choices": ["skip", "autotune", "force"], "default": "skip"},
            "autotune_flags": {"type": "list", "elements": "str"},
            "autotune_bounds": {"type": "dict", "default": {}},
            "sglang_python": {"type": "str"},
            "environment": {"type": "dict", "default": {}},
            "sglang_flags": {"type": "dict"},
            "sglang_flags_file": {"type": "path"},
            "accounting": {"type": "str", "choices": ["A", "B", "C"]},
            "gpu_mem_gib": {"type": "float"},
            "free_gib": {"type": "float"},
            "context_overhead_gib": {"type": "float"},
            "weights_gib": {"type": "float"},
            "draft_weights_gib": {"type": "float"},
            "reclaim_match": {"type": "str", "default": "sglang"},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        mutually_exclusive=[("sglang_flags", "sglang_flags_file")],
        supports_check_mode=True,
    )


def sglang_install(module: AnsibleModule, python: str, environment: dict, accounting: str | None):
    argv = probe_argv(python)
    env = {str(k): str(v) for k, v in environment.items()}
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc != 0:
        raise PlanInputError(
            f"cannot import sglang with {python} (exit {rc}): {(err or out).strip()[-400:]}; "
            "set sglbench_sglang_python to the Python that has SGLang, or give the accounting variant"
        )
    install = parse_probe(out)
    install.markers = find_markers(install.path)
    return resolve_accounting(install, accounting)


def host_memory(module: AnsibleModule, p: dict, tp: int) -> dict:
    argv = smi_argv(p["nvidia_smi"])
    rc, out, err = module.run_command(argv)
    if rc != 0:
        raise PlanInputError(
            f"{' '.join(argv)} exited {rc}: {(err or out).strip()[-400:]}; "
            "give gpu_mem_gib and free_gib to plan without nvidia-smi"
        )
    mem = gpu_memory(out, p["gpus"])
    if p["reclaim_match"]:
        rc, apps, err = module.run_command(apps_argv(p["nvidia_smi"]))
        if rc != 0:
            raise PlanInputError(
                f"nvidia-smi --query-compute-apps exited {rc}: {(err or apps).strip()[-400:]}"
            )
        add_reclaimable(mem, apps, read_cmdline, p["reclaim_match"])
    overhead = context_overhead_gib(tp) if p["context_overhead_gib"] is None else p["context_overhead_gib"]
    return {
        **mem.to_dict(),
        "gpu_mem_gib": round(mem.min_total_mib / 1024.0, 4),
        "free_gib": round(free_gib_at_start(mem, tp, overhead), 4),
        "context_overhead_gib": overhead,
    }


def run(module: AnsibleModule) -> None:
    p = module.params
    flags = launch_flags(p["argv"])
    python = p["sglang_python"] or (
        p["argv"][0] if p["argv"] and not p["argv"][0].startswith("--") else "python3"
    )
    ctx = {"unit_argv": p["argv"], "gpus": p["gpus"]}
    # the server's environment as far as the Hugging Face cache goes (HF_HOME, HF_HUB_CACHE, ...)
    hf_env = {**os.environ, **{str(k): str(v) for k, v in p["environment"].items()}}
    try:
        if not flags:
            raise PlanError("argv", "no launch_server flags found (expected at least --model-path)")
        catalog = None
        if p["sglang_flags"]:
            try:
                catalog = catalog_from_dict(p["sglang_flags"], "sglang_flags")
            except CatalogError as exc:
                raise PlanError("sglang_flags", str(exc)) from None
        elif p["sglang_flags_file"]:
            try:
                catalog = load_file(p["sglang_flags_file"])
            except CatalogError as exc:
                again = "run the play again from its preflight, which writes it again"
                raise PlanError("sglang_flags_file", f"{exc}; {again}") from None
        try:
            tp = int(getattr(parse_launch_args_or_raise(flags, catalog=catalog), "tp_size", None) or 1)
        except SglangArgsError as exc:
            raise PlanError("argv", str(exc)) from None
        if len(p["gpus"]) != tp:
            raise PlanError("gpus", f"{len(p['gpus'])} GPU(s) {p['gpus']} given for --tp-size {tp}")
        install = sglang_install(module, python, p["environment"], p["accounting"])
        if p["gpu_mem_gib"] is not None and p["free_gib"] is not None:
            memory = {"gpus": p["gpus"], "gpu_mem_gib": p["gpu_mem_gib"], "free_gib": p["free_gib"]}
        else:
            memory = host_memory(module, p, tp)
        gpu_mem = p["gpu_mem_gib"] if p["gpu_mem_gib"] is not None else memory["gpu_mem_gib"]
        free = p["free_gib"] if p["free_gib"] is not None else memory["free_gib"]
        inputs = {**memory, "gpu_mem_gib": gpu_mem, "free_gib": free, "sglang": install.to_dict()}

        def plan_fn(launch: list[str]) -> dict:
            return plan_command(
                launch,
                gpu_mem_gib=gpu_mem,
                free_gib=free,
                weights_gib=p["weights_gib"],
                draft_weights_gib=p["draft_weights_gib"],
                accounting=install.accounting,
                env=hf_env,
                sglang_catalog=catalog,
            ).to_dict()

        allowed = p["autotune_flags"] if p["autotune_flags"] is not None else list(DEFAULT_AUTOTUNE_FLAGS)
        outcome = decide(plan_fn, flags, p["policy"], allowed, p["autotune_bounds"])
    except (PlanError, PlanInputError, PolicyError) as exc:
        where = f"{exc.field}: {exc.message}" if isinstance(exc, PlanError) else str(exc)
        msg = f"cannot plan this config: {where}"
        if p["policy"] == "force":
            module.exit_json(
                changed=False,
                plan=None,
                action="start",
                policy="force",
                tuned=False,
                argv=p["argv"],
                reason=f"forced without a plan ({msg})",
                autotune=None,
                inputs=None,
                error=msg,
                models=models_identity(p["argv"], hf_env),
            )
        models = models_identity(p["argv"], hf_env)
        module.fail_json(msg=msg + " (policy force starts it anyway)", models=models, **ctx)
        return
    prefix = p["argv"][: len(p["argv"]) - len(flags)]
    tuned = outcome.original is not None
    autotune = None
    if (p["policy"] == "autotune" and not outcome.plan.get("fits", False)) or tuned:
        autotune = {
            "applied": tuned,
            "flags": outcome.decision.tuned_flags,
            "recommendation": outcome.decision.recommendation,
            "rejected": outcome.decision.rejected,
            "allowed_flags": allowed,
            "bounds": p["autotune_bounds"],
            "original": outcome.original,
        }
    module.exit_json(
        changed=False,
        plan=outcome.plan,
        action=outcome.decision.action,
        policy=p["policy"],
        reason=outcome.decision.reason,
        tuned=tuned,
        argv=prefix + outcome.flags,
        autotune=autotune,
        inputs=inputs,
        models=models_identity(p["argv"], hf_env),
    )


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
