"""Speed and scale, measured: ``python -m benchmarks`` (full) or ``python -m benchmarks --ci``.

* ``synthetic`` — stack configs with N tenants (two pools each), derived from a stack file.
* ``runner`` — one measured evaluation (the program, or the bare-SDK floor) in a fresh process.
* ``floor`` — the floor program: a graph of trivial resources shaped like the recorded one.
* ``graph`` — the deployment critical path and tenant/pool independence of a recorded graph.
* ``footprint`` — CPU and memory requested per hosted control plane vs a dedicated one.
* ``report`` — plain-text tables, goal verdicts and the structural checks of the CI mode.
"""
