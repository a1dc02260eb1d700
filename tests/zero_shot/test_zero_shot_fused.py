"""Zero-shot inside the probe unit's pass (decision 0112) gives what its own pass gives, bit for bit,
and shares what the fitted calibration shares with the shipped one (issue 29 item 9).

The data: ``crs bench paper-scale``'s generator at a tiny scale (three tasks, a multilabel one with a
shift target, corrupted conditions; ``enc01`` a vision-language model with imported prototypes)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crs.bench.paper_scale import PaperScaleConfig, prepare
from crs.cache.store import FeatureStore, store_path
from crs.evaluate import zero_shot
from crs.evaluate.units import ProbeUnit, probe_settings, probe_units
from crs.evaluate.zero_shot import run_zero_shot_unit, same_rankings, unit_prototypes
from crs.spec import load_spec

TINY = PaperScaleConfig(encoders=2, scale=0.01, dim=48, max_corruptions=1, severities=(1, 5), n_boot=20,
                        label_fractions=(0.1, 1.0), seeds=(0, 1), Cs=(0.1, 1.0))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    work = tmp_path_factory.mktemp("fused")
    prepare(TINY, work)
    spec = load_spec(work / "spec.toml")
    return {"work": work, "spec": spec}


def _unit(spec, encoder: str, task: str) -> ProbeUnit:
    return next(u for u in probe_units(spec) if u.encoder == encoder and u.task == task)


def _standalone(spec, unit: ProbeUnit, output=None):
    store = FeatureStore(store_path(spec.cache, unit.task))
    return run_zero_shot_unit(unit, spec.cache, probe_settings(spec), unit_prototypes(spec, unit.encoder, unit.task, store),
                              output)


def test_a_monotone_map_keeps_the_ranking_and_a_merged_tie_does_not():
    shipped = np.array([[0.1, 0.9], [0.4, 0.2], [0.4, 0.5]])
    assert same_rankings(shipped, np.stack([shipped**2, 0.5 * shipped + 0.1])).all()
    merged = shipped.copy()
    merged[0, 0] = 0.4  # a saturated sigmoid: two rows now tie
    split = shipped.copy()
    split[2, 0] = 0.41  # a tie broken
    assert not same_rankings(shipped, np.stack([merged, split])).any()


def test_shared_rank_metrics_leave_every_record_as_it_was(tiny, monkeypatch):
    """Multilabel: a fitted calibration whose columns rank as the shipped ones take the shipped AUROC
    and its standard error; the records are those of scoring every calibration in full, bit for bit."""
    spec = tiny["spec"]
    unit = _unit(spec, "enc01", "chexpert")
    calls: list[int] = []
    original = zero_shot.same_rankings

    def counted(shipped, others):
        found = original(shipped, others)
        calls.append(int(found.sum()))
        return found

    monkeypatch.setattr(zero_shot, "same_rankings", counted)
    shared = _standalone(spec, unit)
    assert sum(calls) > 0  # the sharing was used
    monkeypatch.setattr(zero_shot, "same_rankings", lambda shipped, others: np.zeros(len(others), dtype=bool))
    full = _standalone(spec, unit)
    pd.testing.assert_frame_equal(shared.records, full.records, check_exact=True)
    pd.testing.assert_frame_equal(shared.prompts, full.prompts, check_exact=True)
