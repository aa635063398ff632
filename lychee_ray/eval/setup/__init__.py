"""What an eval run is set up from and the shapes it writes (imports no other ``eval`` subpackage).

- :mod:`.datasets` — benchmark questions: load a dataset, select conversations and questions;
- :mod:`.variants` — the evaluated variants (the method, baselines, ablations) and the paper's figures;
- :mod:`.rows` — typed question and answer rows and their Arrow schemas;
- :mod:`.layout` — the run directory, spelled once;
- :mod:`.errors` — :class:`~lychee_ray.eval.setup.errors.EvalError`.
"""
