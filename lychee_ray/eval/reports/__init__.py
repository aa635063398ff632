"""Reports of eval results (imports :mod:`lychee_ray.eval.metrics` and :mod:`lychee_ray.eval.setup` only).

- :mod:`.report` — ``RUN_DIR/report.md`` of ``lychee-ray eval`` from ``results.json``;
- :mod:`.plots` — its PNG plots;
- :mod:`.retrieval_table` — the Markdown tables of an ``eval-retrieval`` report.
"""
