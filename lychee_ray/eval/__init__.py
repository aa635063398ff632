"""Evaluation, split like the build: what is evaluated apart from where it runs.

- questions and run directory: :mod:`.datasets`, :mod:`.layout`, :mod:`.resume`, :mod:`.rows`
- stores and their costs: :mod:`.stores`, :mod:`.costs`, :mod:`.variants`
- evaluators (plain classes called on a store or corpus): :mod:`.evaluators` (answers via
  :mod:`.answerer` and :mod:`.judge`; retrieval via :mod:`.retrieval`; segmentation via
  :mod:`.segmentation`); the retrieval baselines: :mod:`.baselines`
- metrics and results: :mod:`.metrics` (by id), :mod:`.context_metrics` (by context text),
  :mod:`.locomo_scoring` (LoCoMo F1, BLEU-1), :mod:`.seg_metrics`, :mod:`.aggregate`, :mod:`.report`,
  :mod:`.plots`, :mod:`.retrieval_table`
- executors: :mod:`.executors` (local, no Ray); the Ray executor is :mod:`lychee_ray.ray.eval_job`
- the whole ``lychee-ray eval`` run: :func:`lychee_ray.eval.run.run_eval`

Submodules are imported explicitly (this package imports nothing, so light modules such as
:mod:`.metrics` stay light).
"""
