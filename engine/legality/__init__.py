"""Legality: every hard rule a plan's layout must pass, each written once.

- :mod:`engine.legality.rules`: the layout, pipeline-split and batch rules on plain
  values, grouped by the parallel dimension they constrain, and the values each
  dimension can take without breaking them (what the layout search enumerates).
- :mod:`engine.legality.offload`: which offload placements each strategy supports.
- :mod:`engine.legality.stack`: which strategies and methods each training stack runs.
- :mod:`engine.legality.checks`: a whole plan's problems, and ``check(plan)``, which
  ``estimate()`` calls.

Each rule returns a :class:`~engine.errors.Problem`: the plan fields it concerns and
one sentence naming them. The plan's validators, ``estimate()``, the layout lattice
and the GUI's field marking all ask these modules, so they cannot disagree. Rules are
split from ``checks`` (and this file imports neither) because the plan's own pydantic
validators run some of them at load time, and ``checks`` needs the Plan.
"""
