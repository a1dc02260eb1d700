"""One look for every report figure: colour-blind-safe colours, a marker per encoder, readable sizes.

Colours are the Okabe-Ito palette (distinguishable under the common colour-vision deficiencies);
each encoder also gets its own marker so lines stay apart in greyscale print and past eight
encoders, where colours repeat.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
REFERENCE_GREY = "#666666"
DPI = 110

AXIS_TITLES = {
    "discrimination": "discrimination",
    "calibration": "calibration",
    "label_efficiency": "label efficiency",
    "robustness": "robustness",
}

RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@dataclass(frozen=True)
class EncoderStyle:
    colour: str
    marker: str


def encoder_styles(encoders: list[str]) -> dict[str, EncoderStyle]:
    """A fixed colour and marker per encoder, in the order given (the report uses CRS rank order)."""
    return {
        name: EncoderStyle(OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)])
        for i, name in enumerate(encoders)
    }


@contextmanager
def report_style():
    """Matplotlib settings for the report, restored on exit so library users keep their own."""
    with plt.rc_context(RC):
        yield


def save(figure, path: Path) -> Path:
    """Save as PNG and free the figure (a report makes a dozen; pyplot keeps them alive otherwise)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return path
