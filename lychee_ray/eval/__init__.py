"""Evaluation, split by concern into subpackages whose imports point one way.

- :mod:`.setup` — what a run is set up from and writes: datasets, variants, rows, run layout, errors;
- :mod:`.metrics` — pure scoring: by evidence id, by context text, LoCoMo F1/BLEU-1, segmentation,
  record quality;
- :mod:`.baselines` — retrieval baselines and TextTiling;
- :mod:`.reports` — the eval report, its plots, the eval-retrieval tables (import metrics and setup);
- :mod:`.runners` — evaluators, answerer, judge, executors, stores, costs, resume, aggregation and
  the whole ``lychee-ray eval`` run (:func:`lychee_ray.eval.runners.run.run_eval`); may import all
  of the above.

``setup``, ``metrics`` and ``baselines`` import no other ``eval`` subpackage; ``reports`` imports
``metrics`` and ``setup``; nothing imports ``runners`` but the CLI, the API and the Ray executor
(:mod:`lychee_ray.ray.eval_job`). Submodules are imported explicitly (no package here imports
anything, so light modules such as :mod:`.metrics.evidence` stay light).
"""
