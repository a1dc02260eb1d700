"""Which feature chunks of a mirror the read-through fetched (decision 0187), for a whole pull to tell them from
work done here (decision 0190). Its own module: the transfer reads it and the read-through writes it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

READ_THROUGH_FOLDER = ".crs-readthrough"
"""The read-through's own folder inside a mirror (settings, ledger, locks); never transferred."""
LEDGER_FILE = "ledger.sqlite"


def fetched_paths(mirror: Path | str) -> set[str]:
    """The feature chunks (paths relative to the mirror) the read-through fetched and holds: copies of the URL's
    bytes checked against their recorded sha256, never work done here, so a whole pull may replace them."""
    ledger = Path(mirror) / READ_THROUGH_FOLDER / LEDGER_FILE
    if not ledger.is_file():
        return set()
    connection = sqlite3.connect(ledger, timeout=600)
    try:
        return {str(path) for (path,) in connection.execute("SELECT path FROM held").fetchall()}
    except sqlite3.OperationalError:  # a ledger with no table yet holds nothing
        return set()
    finally:
        connection.close()
