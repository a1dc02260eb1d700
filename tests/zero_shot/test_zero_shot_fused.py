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
from crs.evaluate.units import ProbeUnit, probe_settings, probe_units
from crs.evaluate.zero_shot import run_zero_shot_unit, unit_prototypes
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


def _frames(folder):
    zero = folder / "zero_shot"
    arrays = {path.name: dict(np.load(path)) for path in sorted((zero / "predictions").glob("*.npz"))}
    return pd.read_parquet(zero / "records.parquet"), pd.read_parquet(zero / "prompts.parquet"), arrays


def _same_arrays(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        assert a[name].keys() == b[name].keys(), name
        for key in a[name]:
            np.testing.assert_array_equal(a[name][key], b[name][key], err_msg=f"{name} {key}")


def test_fused_zero_shot_is_its_own_pass_bit_for_bit_and_leaves_the_probes_alone(tiny):
    """``probe_spec`` with zero-shot on runs it inside the VLM's probe units (decision 0112): the
    zero_shot folder is what ``zero_shot_spec``'s own pass writes, the probes' records and predictions
    are those of a run with zero-shot off, each VLM unit's zero-shot CPU is its own column of
    ``probe_costs.csv``, and a rerun that reuses every unit gives the same zero-shot again."""
    from dataclasses import replace

    from crs.evaluate.stage import probe_spec
    from crs.evaluate.zero_shot import zero_shot_spec

    spec, work = tiny["spec"], tiny["work"]
    fused, off, alone = (replace(spec, output=work / name) for name in ("fused", "off", "alone"))
    probe_spec(fused, jobs=1, progress=False, zero_shot_encoders=["enc01"])
    probe_spec(off, jobs=1, progress=False)
    zero_shot_spec(alone, encoders=["enc01"])

    records, prompts, arrays = _frames(fused.output)
    alone_records, alone_prompts, alone_arrays = _frames(alone.output)
    assert set(records["task"]) == {"isic2019", "aptos2019", "chexpert"} and set(records["encoder"]) == {"enc01"}
    pd.testing.assert_frame_equal(records, alone_records, check_exact=True)
    pd.testing.assert_frame_equal(prompts, alone_prompts, check_exact=True)
    _same_arrays(arrays, alone_arrays)

    pd.testing.assert_frame_equal(pd.read_parquet(fused.output / "records.parquet"),
                                  pd.read_parquet(off.output / "records.parquet"), check_exact=True)
    for path in sorted((off.output / "predictions").glob("*.npz")):
        _same_arrays({path.name: dict(np.load(path))}, {path.name: dict(np.load(fused.output / "predictions" / path.name))})
    costs = pd.read_csv(fused.output / "probe_costs.csv")
    assert (costs.loc[costs["encoder"] == "enc01", "zero_shot_cpu_s"] > 0).all()
    assert (costs.loc[costs["encoder"] == "enc00", "zero_shot_cpu_s"] == 0).all()
    assert (pd.read_csv(off.output / "probe_costs.csv")["zero_shot_cpu_s"] == 0).all()

    (fused.output / "zero_shot" / "records.parquet").unlink()
    outcome = probe_spec(fused, jobs=1, progress=False, zero_shot_encoders=["enc01"])
    assert outcome.units_fitted == 0  # every unit reused: the zero-shot in a pass of its own
    again, again_prompts, again_arrays = _frames(fused.output)
    pd.testing.assert_frame_equal(again, alone_records, check_exact=True)
    _same_arrays(again_arrays, alone_arrays)


def test_prototypes_are_made_before_any_probe_unit_runs(tiny):
    """An encoder without prototypes is refused in one line before a probe is fitted: no records."""
    from dataclasses import replace

    from crs.evaluate.stage import probe_spec
    from crs.evaluate.zero_shot import ZeroShotError

    bad = replace(tiny["spec"], output=tiny["work"] / "bad")
    with pytest.raises(ZeroShotError, match="enc00.*no imported prototypes"):
        probe_spec(bad, jobs=1, progress=False, zero_shot_encoders=["enc00", "enc01"])
    assert not (bad.output / "records.parquet").exists()


@pytest.mark.parametrize("numba_off", [False, True])
def test_the_cosines_ride_along_in_the_probes_kernel_and_match_zero_shots_own_pass(tiny, monkeypatch, numba_off):
    """With the compiled kernel, the probe unit's float16 rows are widened once for the probes' logits
    and zero-shot's cosines (decision 0116: ``add_dots``, never ``add_block``); without it
    (``CRS_NO_NUMBA=1``) zero-shot gets the blocks. Either way the unit's zero-shot records, prompt
    AUROCs and predictions are its own pass's bit for bit, and the probes' records those of a unit
    without zero-shot."""
    from crs.axes import weighted_kernel
    from crs.evaluate.units import run_unit
    from crs.evaluate.zero_shot import ZeroShotJob, ZeroShotPass
    from crs.probes import predict_kernel

    if not numba_off and predict_kernel.widened_logits is None:
        pytest.skip("numba is not installed (the `fast` extra)")
    monkeypatch.setenv(weighted_kernel.DISABLE_ENV, "1" if numba_off else "0")
    spec, work = tiny["spec"], tiny["work"]
    calls = {"add_dots": 0, "add_block": 0}

    def spy(name):
        original = getattr(ZeroShotPass, name)

        def counted(self, *args):
            calls[name] += 1
            return original(self, *args)

        return counted

    for name in calls:
        monkeypatch.setattr(ZeroShotPass, name, spy(name))
    for task in ("chexpert", "isic2019"):
        unit = _unit(spec, "enc01", task)
        store = FeatureStore(store_path(spec.cache, unit.task))
        assert store.feature_array("enc01", "clean").dtype == np.float16
        prototypes = tuple(unit_prototypes(spec, unit.encoder, unit.task, store))
        folder = work / f"ride_{task}_{numba_off}"
        settings = probe_settings(spec)
        fused = run_unit(unit, spec.cache, settings, zero_shot=ZeroShotJob(prototypes, folder / "fused"))
        fused_calls = dict(calls)
        alone = run_zero_shot_unit(unit, spec.cache, settings, list(prototypes), folder / "alone")
        if numba_off:
            assert fused_calls["add_dots"] == 0 and fused_calls["add_block"] > 0
        else:
            assert fused_calls["add_dots"] > 0 and fused_calls["add_block"] == 0
        pd.testing.assert_frame_equal(fused.zero_shot.records, alone.records, check_exact=True)
        pd.testing.assert_frame_equal(fused.zero_shot.prompts, alone.prompts, check_exact=True)
        _same_arrays(*({p.name: dict(np.load(p)) for p in sorted((folder / side / "zero_shot").rglob("*.npz"))}
                       for side in ("fused", "alone")))
        pd.testing.assert_frame_equal(fused.records, run_unit(unit, spec.cache, settings).records, check_exact=True)
        for name in calls:
            calls[name] = 0


def test_the_score_ranks_the_stored_keys_so_it_reproduces_the_records(tiny):
    """The zero-shot score's point AUROCs (clean and robust) are the records' shipped AUROCs: both rank
    the keys stored beside the probabilities (decision 0115; the float32 shipped probabilities of the
    multilabel task saturate at 1.0). A folder written before the keys still scores (its probabilities)."""
    from dataclasses import replace

    from crs.evaluate.zero_shot import zero_shot_spec
    from crs.scoring.settings import ScoreSettings
    from crs.scoring.zero_shot import score_zero_shot

    spec, work = tiny["spec"], tiny["work"]
    run = replace(spec, output=work / "keys")
    records = zero_shot_spec(run, encoders=["enc01"]).records
    score = score_zero_shot(run.output, ScoreSettings(n_boot=20, seed=0))
    shipped = records[(records["calibration"] == "shipped") & (records["seed"] == records["seed"].min())]
    for (encoder, task), row in score.comparison.iterrows():
        mine = shipped[(shipped["encoder"] == encoder) & (shipped["task"] == task)]
        assert abs(row["zero_shot_auroc"] - mine.loc[mine["condition"] == "clean", "auroc"].item()) < 1e-12, task
        parts = [mine.loc[mine["condition"] == c, "auroc"].mean() for c in ("corrupt", "shift")
                 if (mine["condition"] == c).any()]
        assert abs(row["robustness_auroc"] - np.mean(parts)) < 1e-12, task
    for path in (run.output / "zero_shot" / "predictions").glob("*.npz"):  # as written before the keys
        arrays = dict(np.load(path))
        assert any(key.endswith("_keys") for key in arrays)
        np.savez(path, **{key: value for key, value in arrays.items() if not key.endswith("_keys")})
    old = score_zero_shot(run.output, ScoreSettings(n_boot=20, seed=0))
    assert np.isfinite(old.comparison["zero_shot_auroc"]).all()
