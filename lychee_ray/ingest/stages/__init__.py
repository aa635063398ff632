"""A build run as stages: read → decide → embed turns → construct → embed records and nodes → commit.

The write path's steps (``ingest/decide.py``, ``ingest/construct.py``, ``ingest/commit.py``) and the
two embedding stages here (:mod:`.embedding`) each take a batch of
:class:`~lychee_ray.ingest.stages.work.StageWork` (one input conversation each), so one stage can
run where its resources are — the embedding stages on GPU workers, construct next to the LLM
limiter — and batch across conversations. The Ray job (``lychee_ray.ray.build_job``) runs each
stage as its own Ray Data operator; the in-process runner (:mod:`lychee_ray.ingest.local_stages`)
runs the same functions as an asyncio pipeline. Submodules are imported by their full path.
"""
