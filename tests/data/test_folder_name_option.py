"""The `folder` loader's documented `name` option reaches the loader (it once collided with load_dataset's own argument)."""

from __future__ import annotations

from crs.data import load_dataset, load_entry
from crs.spec import DatasetEntry

from data_trees import build_folder


def test_folder_name_option_names_the_task(tmp_path):
    build_folder(tmp_path)
    options = {"modality": "dermoscopy", "split_column": "split", "group_column": "patient", "name": "pets"}
    dataset = load_dataset("folder", tmp_path, **options)
    assert dataset.name == "pets" and dataset.task.name == "pets"
    entry = DatasetEntry(name="my_pets", loader="folder", root=tmp_path, options=options)
    loaded = load_entry(entry)
    # The spec entry names the data set (its cache store); the option still names the task.
    assert loaded.name == "my_pets" and loaded.task.name == "pets"
    assert len(loaded) == 18
