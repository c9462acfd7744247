from sglbench.sim.server import main

raise SystemExit(main())
