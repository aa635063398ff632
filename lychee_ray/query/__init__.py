"""The query side (DESIGN §1 steps 4–7): plan → recall channels → RRF → rerank → budgeted
selection → answer, behind :class:`~lychee_ray.query.engine.MemoryStore`.

Modules by stage: ``plan/`` (planners), ``recall`` (the conversation view and vector / node / time
channels), ``bm25`` and ``lexical`` (the lexical channel and its vocabulary), ``hits``, ``fuse``,
``rerank``, ``select`` and ``evidence`` (selection and serialisation), ``answer``; the engine with
its ``cache``, ``results`` and ``errors``. The public names are exported by :mod:`lychee_ray`.
"""
