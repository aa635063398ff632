"""Running evaluations: evaluators, executors and the whole ``lychee-ray eval`` run.

May import every other ``eval`` subpackage; none of them imports this one.

- :mod:`.evaluators` — the plain evaluator classes (answers via :mod:`.answerer` and :mod:`.judge`;
  retrieval via :mod:`.retrieval`; segmentation via :mod:`.segmentation`);
- :mod:`.executors` — where the work runs (local, no Ray; the Ray executor is
  :mod:`lychee_ray.ray.eval_job`);
- :mod:`.stores` and :mod:`.costs` — the variant stores (reused or built) and their construction costs;
- :mod:`.resume` — answer parts and run state, so every step resumes;
- :mod:`.aggregate` — scores per question and results per variant and category;
- :mod:`.run` — the whole ``lychee-ray eval`` run: :func:`~lychee_ray.eval.runners.run.run_eval`.
"""
