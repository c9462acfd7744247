"""``python -m sglang.launch_server`` on a sim host: runs the sglbench SGLang stand-in."""

import sys

from sglbench.sim.server import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="launch_server.py"))
