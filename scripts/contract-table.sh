#!/usr/bin/env bash
# The contract suite (tests/contract/) on both sides, the real SGLang when its environment is there
# (`make real-sglang`; without it that side skips with one line and the stand-in is held against the
# recording), then the per-surface table written into docs/contract.md. Extra args go to pytest.
#   scripts/contract-table.sh            # ~4-5 min with the real server (two starts), ~6 s without
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-.venv/bin/python}"
SGLBENCH_CONTRACT_UPDATE=1 exec "$PY" -m pytest tests/contract -m "real or not real" -p no:cacheprovider -q "$@"
