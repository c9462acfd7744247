#!/usr/bin/python
"""Documentation stub: sglbench_record is an action plugin (plugins/action/sglbench_record.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_record
short_description: Write the files of one config attempt on the controller, atomically
description:
  - Runs on the controller (action plugin); nothing is sent to the managed host.
  - Creates I(dir) and writes each entry of I(files) with a temp file + rename, so a killed run never leaves
    a half-written record. Mappings and lists are written as JSON.
  - With I(record), C(record.json) is built from the facts the play gathered by the result contract
    (C(RecordFacts) in python/sglbench/hostlib/result_schema.py) and written first.
  - A C(record.json) entry must be JSON with the schema id C(sglbench.attempt/1) (see docs/records.md).
  - Entries whose content is null are skipped.
options:
  dir:
    description: Attempt directory on the controller, e.g. C(results/<run_id>/<host>/<config>-tp<N>).
    type: path
    required: true
  record:
    description:
      - The attempt's facts, the fields of C(RecordFacts) - C(run_id), C(host), C(instance) (the matrix
        instance), C(outcome), C(simulated), C(failure), C(timings), C(wait) (sglbench_wait_ready),
        C(journal) (sglbench_stop's journal), C(gpu_free) (sglbench_stop before the start), C(plan),
        C(capacity), C(server_info), C(benchmark), C(identity), C(resume).
      - C(unit.file) in the record names C(unit.service) when I(files) writes one.
    type: dict
  files:
    description: File name to content (text, or a mapping/list written as JSON).
    type: dict
    required: true
  mode:
    description: File mode.
    type: str
    default: "0644"
  move_previous:
    description:
      - First move the previous attempt's record, journal, unit and derived files in I(dir) to
        C(previous/<UTC>-<outcome>/) (C(sglbench.resume.prepare_attempt)), as the resume step does. For an
        attempt that ended before that step (its record would otherwise replace the earlier one).
    type: bool
    default: false
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: cycle | Write the record
  sglbench_record:
    dir: results/run1/simhost/qwen-ar-tp1
    record:
      run_id: run1
      host: simhost
      instance: "{{ sglang_cycle_instance }}"
      outcome: ok
      journal: "{{ journal }}"
    files:
      journal.log: "{{ journal.journal }}"
"""

RETURN = r"""
written:
  description: Names of the files written.
  type: list
  elements: str
  returned: always
"""

if __name__ == "__main__":
    raise SystemExit("sglbench_record is an action plugin; it runs inside ansible-playbook on the controller")
