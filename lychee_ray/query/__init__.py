"""The query side (DESIGN §1 steps 4–7): plan → recall channels → RRF → rerank → budgeted
selection → answer, behind :class:`~lychee_ray.query.engine.MemoryStore`.

Modules by stage: ``plan/`` (planners), ``view`` (a loaded conversation: :class:`~.view.ConversationView`,
:class:`~.view.TurnColumns`) and ``view_extend``, ``channels/`` (the recall channels and their registry),
``bm25`` (the lexical index), ``hits``, ``fuse``, ``rerank``, ``mmr`` (the greedy loop), ``select`` /
``select_turns`` / ``windows`` and ``evidence`` (selection and serialisation), ``answer``; the
engine with its ``cache``, ``results`` and ``errors``. The public names are exported by :mod:`lychee_ray`.
"""
