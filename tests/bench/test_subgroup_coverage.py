"""The subgroup coverage bench (issue 40) runs on a label file of CheXpert's format, generated here (the real
file is an optional input by path; the tests never need it)."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd

from crs.bench.subgroup_coverage import (
    ENCODERS,
    designs,
    read_chexpert,
    simulate,
    summary_markdown,
    true_group_auroc,
)


def _label_file(path, n_patients=1500, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(1, n_patients + 1):
        sex, age = rng.choice(["Female", "Male", "Unknown"], p=[0.45, 0.54, 0.01]), int(rng.integers(18, 95))
        for study in range(1, 2 + rng.poisson(1.5)):
            effusion = rng.choice([1.0, 0.0, -1.0, np.nan], p=[0.35, 0.2, 0.05, 0.4])
            rows.append({"Path": f"CheXpert-v1.0-small/train/patient{p:05d}/study{study}/view1_frontal.jpg",
                         "Sex": sex, "Age": age, "Frontal/Lateral": "Frontal", "AP/PA": "AP",
                         "Pleural Effusion": effusion})
    with gzip.open(path, "wt") as handle:
        pd.DataFrame(rows).to_csv(handle, index=False)


def test_the_label_file_gives_patients_and_the_three_groupings(tmp_path):
    path = tmp_path / "chexpert_train.csv.gz"
    _label_file(path)
    rows = read_chexpert(path)
    assert len(np.unique(rows.patient)) < len(rows.patient)  # several images a patient
    assert set(np.unique(rows.label)) == {0.0, 1.0}  # uncertain and blank read as negative
    assert {name: int(codes.max()) + 1 for name, (codes, _) in rows.groups.items()} == {
        "sex": 2, "age band": 4, "age band x sex": 8}


def test_a_small_real_label_run_reports_every_row(tmp_path):
    """Patients drawn from the file's pool (the TRUTH_CHECK_PATIENTS first of a shuffle are held out; a small
    file leaves its pool empty, so the pool here is every patient)."""
    from crs.bench.subgroup_coverage import real

    path = tmp_path / "chexpert_train.csv.gz"
    _label_file(path)
    rows = read_chexpert(path)
    found = simulate(real(rows, "age band", np.unique(rows.patient)), 4, 600, data_sets=4, n_boot=30)
    assert 0.0 <= found["worst group, box corners: mean"] <= 1.0
    assert found["box critical value"] > 1.96  # simultaneous over the groups of four encoders
    assert "| age band |" in summary_markdown({"age band": found})
    assert true_group_auroc(4).shape == (4, len(ENCODERS))
    assert len(designs(None)) == 6  # the idealised designs alone when no label file is given
