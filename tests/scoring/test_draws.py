"""Each task's patient resample is keyed on the task's name and test rows (crs.scoring.draws, decision 0144): a
task draws the same patients scored alone as beside other tasks, two sites' tasks of one name draw apart, and
the key is stable across processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np

from crs.scoring.draws import SHIFT_STREAM, TEST_STREAM, task_entropy, task_key
from crs.scoring.result import score_records
from crs.scoring.settings import ScoreSettings


def test_task_key_is_the_names_sha256_in_every_process():
    assert task_key("fundus") == int.from_bytes(hashlib.sha256(b"fundus").digest()[:4], "big") == 2545890336
    # a fresh process (another hash() salt) gives the same key
    out = subprocess.run([sys.executable, "-c", "from crs.scoring.draws import task_key; print(task_key('cxr'))"],
                         capture_output=True, text=True, check=True)
    assert int(out.stdout) == task_key("cxr") == 3138541005
    assert task_entropy(7, "cxr", SHIFT_STREAM) == (7, 3138541005, 1) != task_entropy(7, "cxr", TEST_STREAM)


def test_a_task_draws_the_same_patients_alone_and_beside_other_tasks(tiny_run):
    """fundus is the last of the tiny run's three tasks (sorted) and the only one when scored alone; cxr's
    shift target keeps its draws too."""
    spec, _, records, score = tiny_run
    settings = ScoreSettings.from_config(spec.score)
    for task in ("fundus", "cxr"):
        alone = score_records(records[records["task"].astype(str) == task], settings, run_folder=spec.output)
        drawn, together = alone.bootstrap.case_draws[task], score.bootstrap.case_draws[task]
        assert drawn.seed == together.seed != task_entropy(settings.seed, task, TEST_STREAM)  # rows in the key
        assert np.array_equal(drawn.counts(range(settings.n_boot)), together.counts(range(settings.n_boot)))
    assert set(alone.bootstrap.shift_case_draws) == {"cxr"}
    for target, draws in alone.bootstrap.shift_case_draws["cxr"].items():
        assert np.array_equal(draws.counts(range(5)), score.bootstrap.shift_case_draws["cxr"][target].counts(range(5)))


def test_two_sites_tasks_of_one_name_draw_independent_patients():
    """Two hospitals each score a task named ``cxr`` on 60 patients of their own, 18 positive: keyed on the name
    alone they drew the very same multiplicities (replicate r took patient k of each site as often), which
    couples the sites in a merge; keyed on the name and the rows they draw apart. The same rows give the same
    draws wherever they are scored."""
    from crs.scoring.draws import draws_of_test_rows

    labels = np.r_[np.ones(18), np.zeros(42)]
    site_a = np.array([f"a{k:03d}" for k in range(60)])
    site_b = np.array([f"b{k:03d}" for k in range(60)])
    by_name = [draws_of_test_rows(ids, labels, "binary", 0, task_key("cxr")).counts(range(20)) for ids in (site_a, site_b)]
    assert np.array_equal(*by_name)  # what name-only keys did
    found = [draws_of_test_rows(ids, labels, "binary", 0, task_key("cxr", ids, labels)).counts(range(20))
             for ids in (site_a, site_b)]
    assert not np.array_equal(*found)
    agree = np.mean([np.corrcoef(a, b)[0, 1] for a, b in zip(*found, strict=True)])
    assert abs(agree) < 0.2  # independent, not merely shifted
    again = draws_of_test_rows(site_a.copy(), labels.copy(), "binary", 0, task_key("cxr", site_a, labels))
    assert np.array_equal(again.counts(range(20)), found[0])
    assert task_key("cxr", site_a, labels) != task_key("cxr", site_a, 1 - labels)
