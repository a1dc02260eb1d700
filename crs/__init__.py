"""crs: rank frozen medical-image encoders by a Clinical Reliability Score.

Stage 1 (``crs extract``) caches each encoder's features once; stage 2 (``crs probe``, ``crs score``,
``crs report``) fits many light probes on the cache and scores discrimination, calibration, label
efficiency and robustness.
"""

__version__ = "0.1.0"
