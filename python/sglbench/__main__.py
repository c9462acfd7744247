from sglbench.cli import main

raise SystemExit(main())
