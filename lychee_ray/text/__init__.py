"""Text helpers the pipeline stages share: tokens, stop words, sentences, dates and time expressions.

This layer sits just above :mod:`lychee_ray.core`: it imports only ``lychee_ray.config``,
``lychee_ray.core`` and itself.
"""
