"""What an interrupted stage 2 leaves for the next run, in one line (printed when a run is stopped by Ctrl-C).

Stage 2 writes its records once every unit is fitted, so a stopped stage 2 keeps the units of the
last finished one (those unchanged are reused by the next run) and none of its own.
"""

from __future__ import annotations

from crs.evaluate.artifacts import RunFolder
from crs.evaluate.incremental import UNIT_KEYS
from crs.evaluate.records import read_provenance


def kept_by_probing(folder: RunFolder) -> str:
    """What stage 2 keeps when stopped: the units of its last finished run, never a half-written records file."""
    if not folder.records_path.exists():
        return ("kept the feature cache (complete); no (encoder, task) unit is kept: stage 2 writes its records "
                "once every unit is fitted")
    units = len(read_provenance(folder.records_path).get(UNIT_KEYS, {}))
    return (f"kept the feature cache and the records of {units} (encoder, task) unit(s) of the last finished "
            "stage 2 (unchanged ones are reused); units fitted in the stopped run are not kept")
