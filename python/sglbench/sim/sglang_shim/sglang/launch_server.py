"""``python -m sglang.launch_server`` on a sim host: runs the sglbench SGLang stand-in."""

import sys

from sglbench.sim import release
from sglbench.sim.server import main

if __name__ == "__main__":
    # argparse's prog in usage and errors: 0.5.23 parses with its `sglang serve` parser even when
    # started as `python -m sglang.launch_server`; older releases said launch_server.py
    version = release.version_from_env()
    prog = "sglang serve" if release.at_least(version) else "launch_server.py"
    sys.exit(main(sys.argv[1:], prog=prog))
