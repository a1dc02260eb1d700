"""Headless Chromium with the network closed, for the tests that render crs's pages (report, leaderboard site)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
    # No network: any request that tried to leave the page would go to a dead proxy or fail to resolve.
    "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
]  # fmt: skip


def chromium(folder: Path, *arguments: str) -> str:
    """Run Chromium with ``arguments`` in ``folder`` (a fresh profile there); its stdout, asserting it exited 0."""
    assert CHROMIUM is not None, "chromium not installed (apt-get install chromium); .ci/run installs it"
    profile = folder / f"chromium-profile-{len(list(folder.glob('chromium-profile-*')))}"
    profile.mkdir()
    result = subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *arguments],
        capture_output=True, text=True, timeout=120, cwd=folder,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout
