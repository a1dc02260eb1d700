"""The README's picture: the first screen (1280 x 800) of a report in headless Chromium, saved small.

    python scripts/report_picture.py crs-out/quickstart/report.html docs/images/report-first-screen.png

Run it after `make demo` whenever the report's first screen changes. The network is closed to the
browser (as in tests/headless.py); the picture is scaled to 960 x 600 and stored with a 128-colour
palette, which keeps the text sharp and the file under 150 KB.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

WINDOW = (1280, 800)
STORED = (960, 600)
COLOURS = 128


def screenshot(page: Path, picture: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        sys.exit("report_picture: chromium not found (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "screen.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                        "--disable-background-networking", "--proxy-server=127.0.0.1:9",
                        "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={scratch}/profile",
                        f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={raw}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
        with Image.open(raw) as image:
            small = image.convert("RGB").resize(STORED, Image.Resampling.LANCZOS)
    picture.parent.mkdir(parents=True, exist_ok=True)
    small.quantize(COLOURS, method=Image.Quantize.MEDIANCUT).save(picture, optimize=True)


if __name__ == "__main__":
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{sys.argv[2]}: {Path(sys.argv[2]).stat().st_size:,} bytes")
