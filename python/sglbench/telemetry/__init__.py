"""Telemetry of one benchmark point, on the controller: the raw series the host sampled, cut to the
measured window, and the figures derived from them (energy, steady state, server counters, throttling,
cost).

Standard library only, like :mod:`sglbench.resume`: the commit in ``plugins/action/sglbench_points.py``
derives the figures inside ``ansible-playbook``, so a point's JSON carries them and no summary re-reads
the series. The raw document the host returns is the contract in ``docs/records.md`` ("Telemetry"):
host epoch seconds everywhere, GPU rows and server rows in long form.

- :mod:`sglbench.telemetry.clock`: host/controller clock offset and its uncertainty (NTP style).
- :mod:`sglbench.telemetry.series`: cleaning, exact window cutting (values interpolated at the edges),
  gaps, time integrals and time-weighted means.
- :mod:`sglbench.telemetry.steady`: MSER-5 steady-state detection.
- :mod:`sglbench.telemetry.throttle`: the clock-event reason bits and the throttled share of a window.
- :mod:`sglbench.telemetry.derive`: one point's figures from the raw document (energy, J/token, power,
  server figures, steady window, cost), the dict :class:`~sglbench.hostlib.result_schema.PointTelemetry`
  reads.
"""
