"""Outage drills: a pattern applied to two namespaces of a local broker process, its replication tasks run by
the local Functions host, a producer and a consumer, and a regional outage through the broker's control API
(docs/drills.md).

The modules import one way (tests/unit/test_import_cycles.py):
- what a drill is: `scenario` (the base every drill shares), `scenarios` (the three patterns), `recipes`,
  `catalog` (every drill by name, and its checked settings);
- running it: `run` (the timeline), `broker`, `functions`, `processes` (the processes it starts),
  `clients` (the applications), `drill` (settings, timeline and what a scenario sees of the running drill);
- judging it: `metrics` (pure functions over audit records), `summary` (the figures and the printed text).
`run` reads the catalog and calls the summary; a scenario reads `drill` and `metrics`, never `run`; `metrics`
imports nothing of the drills.
"""
