"""Third-party encoders: installed packages register specs through the ``crs.encoders`` entry-point group.

A package declares, in its pyproject.toml::

    [project.entry-points."crs.encoders"]
    my_encoder = "my_package.crs_plugin:specs"

where ``specs`` is an :class:`EncoderSpec`, a list of them, or a function returning either.
The entry points are read once, just before the registry is first looked up (so a broken plugin
fails that lookup with its name, never ``import crs``).
"""

from __future__ import annotations

from importlib.metadata import entry_points

from crs.encoders.registry import EncoderError, EncoderSpec, before_first_lookup, register

ENTRY_POINT_GROUP = "crs.encoders"
_loaded = False


def load_entry_points(force: bool = False) -> list[str]:
    """Register every spec exposed by installed packages; returns the names added."""
    global _loaded
    if _loaded and not force:
        return []
    _loaded = True
    names: list[str] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = point.load()
            specs = target() if callable(target) and not isinstance(target, EncoderSpec) else target
        except Exception as error:
            raise EncoderError(f"entry point {point.name!r} ({point.value}) in group {ENTRY_POINT_GROUP!r} failed to load: {error}") from error
        for spec in [specs] if isinstance(specs, EncoderSpec) else list(specs):
            if not isinstance(spec, EncoderSpec):
                raise EncoderError(f"entry point {point.name!r} returned {type(spec).__name__}, expected EncoderSpec")
            register(spec)
            names.append(spec.name)
    return names


before_first_lookup(load_entry_points)
