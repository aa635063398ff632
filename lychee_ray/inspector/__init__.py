"""The web inspector: what a memory store holds, why a search selected what it did, why a question missed.

``lychee-ray inspect --memory DIR [--eval RUN ...]`` serves it on 127.0.0.1 without Ray
(:mod:`.server`); ``lychee-ray serve`` mounts the same pages under ``/ui`` with the same keys and
tenant scopes as its API (:mod:`.routes`, a :class:`~lychee_ray.serve.app.Mount`). The pages are
plain HTML, CSS and JavaScript modules shipped in ``static/`` (no CDN, no build step); their JSON
comes from :mod:`.catalog` (the list), :mod:`.conversation` (one conversation, every table of the
store's registry), :mod:`.search` (the playground), :mod:`.reports` (the build report) and
:mod:`.evalruns` (eval runs and their questions). docs/inspector.md describes the pages.
"""
