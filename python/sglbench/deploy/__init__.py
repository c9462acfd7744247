"""The deployment answer of a campaign: which config to run up to which load, where speculative decoding
stops paying, the per-GPU Pareto frontier, and why each config's highest load is where it is.

Built on the controller from the points a campaign already records (``sglbench.results``,
``sglbench.summarize``'s table and bootstrap samples): ``levels`` (the measured curves), ``breakeven``
(speedup per level, crossover, deploy table), ``frontier``, ``limits`` and ``slo``; ``answer`` puts them
together per run, ``schema`` owns the three documents, ``store`` writes and reads them beside the run's
hosts, ``text`` and ``plots`` show them in ``sglbench summarize``/``compare`` and the report.
"""
