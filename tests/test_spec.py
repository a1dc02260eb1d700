"""Benchmark specs: every field validated with a message that names it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from crs import spec as spec_module
from crs.spec import (
    DEFAULT_CS,
    DEFAULT_KS,
    DatasetEntry,
    EncoderEntry,
    ExtractConfig,
    ProbeConfig,
    ScoreConfig,
    Spec,
    SpecError,
    load_spec,
    parse_spec,
    spec_from_dict,
    spec_to_dict,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _minimal(**changes):
    data = {
        "name": "t",
        "encoders": ["pixel_stats", "resnet18"],
        "datasets": [{"name": "d", "loader": "synthetic", "root": "data"}],
    }
    data.update(changes)
    return data


def test_defaults_and_relative_paths(tmp_path):
    spec = parse_spec(_minimal(), base=tmp_path)
    assert spec.cache == tmp_path / "cache" and spec.output == tmp_path / "crs-out" / "t"
    assert spec.datasets[0].root == tmp_path / "data"
    assert spec.score.reference_encoder == "median"  # the cohort-median encoder when none is named
    assert 1.0 in spec.probe.label_fractions and spec.score.case_bootstrap is True


def test_encoder_tables_and_defaults_merge(tmp_path):
    spec = parse_spec(
        _minimal(encoders=["pixel_stats", {"name": "resnet18", "input_size": 64}],
                 encoder_defaults={"weights": "random", "input_size": 32}),
        base=tmp_path,
    )
    assert [(e.name, e.weights, e.input_size) for e in spec.encoders] == [
        ("pixel_stats", "random", 32), ("resnet18", "random", 64)]


@pytest.mark.parametrize("change,message", [
    ({"encoders": []}, "field 'encoders' must be a non-empty list"),
    ({"encoders": ["a", "a"]}, "encoder names repeat"),
    ({"probe": {"label_fractions": [0.1, 0.5]}}, "must include 1.0"),
    ({"probe": {"label_fractions": [0.0, 1.0]}}, "must lie in (0, 1]"),
    ({"probe": {"Cs": [-1.0]}}, "Cs must be positive"),
    ({"probe": {"seeds": "0"}}, "field 'seeds' must be a non-empty list of int"),
    ({"extract": {"severities": [0, 6]}}, "severities must lie in 1..5"),
    ({"extract": {"corruptions": "some"}}, "field 'corruptions' must be \"all\", \"none\" (or []: clean"),
    ({"score": {"reference_encoder": "nope"}}, "reference_encoder 'nope' is not among the encoders"),
    ({"score": {"weights": {"speed": 1.0}}}, "unknown field(s) ['speed']"),
    ({"score": {"case_bootstrap": "yes"}}, "field 'case_bootstrap' must be bool"),
    ({"colour": "blue"}, "unknown field(s) ['colour']"),
])
def test_bad_fields_name_the_field(tmp_path, change, message):
    with pytest.raises(SpecError) as error:
        parse_spec(_minimal(**change), base=tmp_path)
    assert message in str(error.value)


@pytest.mark.parametrize("change,hint", [
    ({"extract": {"severites": [1]}}, "did you mean 'severities' for 'severites'?"),
    ({"probe": {"label_fraction": [1.0]}}, "did you mean 'label_fractions' for 'label_fraction'?"),
    ({"score": {"refrence_encoder": "median"}}, "did you mean 'reference_encoder' for 'refrence_encoder'?"),
    ({"encoder": ["pixel_stats"]}, "did you mean 'encoders' for 'encoder'?"),
])
def test_a_key_typo_gets_did_you_mean(tmp_path, change, hint):
    with pytest.raises(SpecError) as error:
        parse_spec(_minimal(**change), base=tmp_path)
    assert hint in str(error.value) and "\n" not in str(error.value)


def test_no_did_you_mean_without_a_close_key(tmp_path):
    with pytest.raises(SpecError) as error:
        parse_spec(_minimal(colour="blue"), base=tmp_path)
    assert "did you mean" not in str(error.value)


def test_an_empty_corruption_list_means_clean_only(tmp_path):
    from crs.corruptions.variants import resolve_variants

    spec = parse_spec(_minimal(extract={"corruptions": []}), base=tmp_path)
    assert spec.extract.corruptions == "none"
    assert resolve_variants("chest_xray", spec.extract.corruptions, spec.extract.severities) == []


def test_dataset_errors_name_the_entry(tmp_path):
    with pytest.raises(SpecError, match=r"datasets\[0\]: missing required field 'root'"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "synthetic"}]), base=tmp_path)
    with pytest.raises(SpecError, match=r"datasets\[0\].shift_target: unknown field"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "x", "root": "r",
                                       "shift_target": {"name": "e", "loader": "x", "root": "r", "shift_target": {}}}]),
                   base=tmp_path)
    with pytest.raises(SpecError, match="data set names repeat"):
        parse_spec(_minimal(datasets=[{"name": "d", "loader": "x", "root": "r"}] * 2), base=tmp_path)


def test_invalid_toml_is_reported_with_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_spec_validates(path):
    spec = load_spec(path)
    assert spec.encoders and spec.datasets
    # spec_to_dict is JSON-friendly and round-trips the names
    as_dict = spec_to_dict(spec)
    assert as_dict["name"] == spec.name
    assert tomllib.loads(path.read_text())["name"] == spec.name


def _python_spec(**changes):
    """The spec of ``_minimal()``, built in Python instead of read from a table."""
    values = dict(
        name="t", cache=Path("cache"), output=Path("out"),
        encoders=(EncoderEntry("pixel_stats"), EncoderEntry("resnet18")),
        datasets=(DatasetEntry("d", "synthetic", Path("data")),),
    )
    values.update(changes)
    return Spec(**values)


# The same mistake, once in a TOML table and once in Python: one check, so one message.
SAME_MISTAKE = [
    ({"probe": {"backend": "jax"}}, lambda: ProbeConfig(backend="jax")),
    ({"probe": {"family": "svm"}}, lambda: ProbeConfig(family="svm")),
    ({"probe": {"selection": "accuracy"}}, lambda: ProbeConfig(selection="accuracy")),
    ({"probe": {"validation": "half"}}, lambda: ProbeConfig(validation="half")),
    ({"probe": {"label_fractions": [0.1, 0.5]}}, lambda: ProbeConfig(label_fractions=(0.1, 0.5))),
    ({"probe": {"label_fractions": [0.0, 1.0]}}, lambda: ProbeConfig(label_fractions=(0.0, 1.0))),
    ({"probe": {"Cs": [-1.0]}}, lambda: ProbeConfig(Cs=(-1.0,))),
    ({"probe": {"family": "knn", "Cs": [2.5]}}, lambda: ProbeConfig(family="knn", Cs=(2.5,))),
    ({"probe": {"seeds": "0"}}, lambda: ProbeConfig(seeds="0")),  # type: ignore[arg-type]
    ({"probe": {"jobs": 0}}, lambda: ProbeConfig(jobs=0)),
    ({"probe": {"jobs": -1}}, lambda: ProbeConfig(jobs=-1)),
    ({"extract": {"severities": [0, 6]}}, lambda: ExtractConfig(severities=(0, 6))),
    ({"extract": {"corruptions": "some"}}, lambda: ExtractConfig(corruptions="some")),
    ({"extract": {"batch_size": 0}}, lambda: ExtractConfig(batch_size=0)),
    ({"score": {"weights": {"speed": 1.0}}}, lambda: ScoreConfig(weights={"speed": 1.0})),
    ({"score": {"weights": {"balance": -1.0}}}, lambda: ScoreConfig(weights={"balance": -1.0})),
    ({"score": {"case_bootstrap": "yes"}}, lambda: ScoreConfig(case_bootstrap="yes")),  # type: ignore[arg-type]
    ({"score": {"n_boot": 0}}, lambda: ScoreConfig(n_boot=0)),
    ({"score": {"reference_encoder": "nope"}}, lambda: _python_spec(score=ScoreConfig(reference_encoder="nope"))),
    ({"encoders": ["a", "a"]}, lambda: _python_spec(encoders=(EncoderEntry("a"), EncoderEntry("a")))),
    ({"encoders": [{"name": "a", "input_size": "64"}]}, lambda: EncoderEntry("a", input_size="64")),  # type: ignore[arg-type]
    ({"datasets": [{"name": "d", "loader": "synthetic", "root": "data", "options": 3}]},
     lambda: DatasetEntry("d", "synthetic", Path("data"), options=3)),  # type: ignore[arg-type]
    ({"datasets": [{"name": "d", "loader": "synthetic", "root": 7}]},
     lambda: DatasetEntry("d", "synthetic", 7)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("change,build", SAME_MISTAKE, ids=lambda c: str(c)[:40] if isinstance(c, dict) else "")
def test_a_spec_built_in_python_fails_with_the_toml_message(tmp_path, change, build):
    with pytest.raises(SpecError) as from_toml:
        parse_spec(_minimal(**change), base=tmp_path)
    with pytest.raises(SpecError) as from_python:
        build()
    assert str(from_python.value) == str(from_toml.value)
    assert "\n" not in str(from_toml.value)


def test_python_spec_is_normalised_like_a_parsed_one(tmp_path):
    built = _python_spec(cache=str(tmp_path / "cache"), output=str(tmp_path / "out"),
                         datasets=[DatasetEntry("d", "synthetic", str(tmp_path / "data"))],
                         probe=ProbeConfig(seeds=[0, 1], label_fractions=[1]))
    assert built.cache == tmp_path / "cache" and isinstance(built.output, Path)
    assert built.datasets == (DatasetEntry("d", "synthetic", tmp_path / "data"),)
    assert built.probe.seeds == (0, 1) and built.probe.label_fractions == (1.0,)
    assert built.score.reference_encoder == "median"  # the cohort median, as in a TOML spec
    parsed = parse_spec(_minimal(cache=str(tmp_path / "cache"), output=str(tmp_path / "out"),
                                 probe={"seeds": [0, 1], "label_fractions": [1]}), base=tmp_path)
    assert spec_to_dict(parsed) == spec_to_dict(built)


def test_probe_grid_defaults_per_family(tmp_path):
    assert ProbeConfig().Cs is None and ProbeConfig().grid == DEFAULT_CS
    assert ProbeConfig(family="ridge").grid == DEFAULT_CS
    assert ProbeConfig(family="knn").grid == tuple(float(k) for k in DEFAULT_KS)
    assert ProbeConfig(family="knn", Cs=(3, 7)).grid == (3.0, 7.0)
    knn = parse_spec(_minimal(probe={"family": "knn"}), base=tmp_path).probe
    assert knn.Cs is None and knn.grid == tuple(float(k) for k in DEFAULT_KS)
    assert ProbeConfig().validation == "fraction" and ProbeConfig(validation="full").validation == "full"


def test_every_default_has_one_home():
    from crs import probes
    from crs.corruptions import SEVERITIES, suites
    from crs.data import base as data_base
    from crs.probes import base as probes_base
    from crs.scoring import formula

    assert probes.DEFAULT_CS is spec_module.DEFAULT_CS and probes.DEFAULT_KS is spec_module.DEFAULT_KS
    assert probes.BACKENDS is spec_module.PROBE_BACKENDS and probes.FAMILIES is spec_module.PROBE_FAMILIES
    assert probes.SELECTIONS is spec_module.SELECTIONS
    assert probes_base.TASK_KINDS is spec_module.TASK_KINDS is data_base.TASK_KINDS
    assert formula.AXES is spec_module.AXES and formula.COMPONENTS is spec_module.COMPONENTS
    assert SEVERITIES is spec_module.SEVERITIES and ExtractConfig().severities == SEVERITIES
    assert suites.SUITES.keys() <= set(spec_module.MODALITIES) and data_base.MODALITIES is spec_module.MODALITIES


# --- shift targets: one table, or several ------------------------------------------------------------

SHIFT_TOML = """
name = "sites"
encoders = ["pixel_stats"]

[[datasets]]
name = "cxr"
loader = "synthetic"
root = "data"
{targets}
"""
TARGET_B = '{ name = "site-b", loader = "synthetic", root = "b", options = { site = "b" } }'
TARGET_C = '{ name = "site-c", loader = "synthetic", root = "c" }'


@pytest.mark.parametrize("targets", [
    f"shift_target = [{TARGET_B}, {TARGET_C}]",
    '[[datasets.shift_target]]\nname = "site-b"\nloader = "synthetic"\nroot = "b"\noptions = { site = "b" }\n'
    '[[datasets.shift_target]]\nname = "site-c"\nloader = "synthetic"\nroot = "c"',
], ids=["inline array", "array of tables"])
def test_several_shift_targets_in_spec_order(tmp_path, targets):
    spec = parse_spec(tomllib.loads(SHIFT_TOML.format(targets=targets)), base=tmp_path)
    (entry,) = spec.datasets
    assert entry.shift_target_names == ("site-b", "site-c")
    assert [t.root for t in entry.shift_targets] == [tmp_path / "b", tmp_path / "c"]
    assert entry.shift_targets[0].options == {"site": "b"}


def test_one_shift_target_table_is_a_list_of_one(tmp_path):
    spec = parse_spec(tomllib.loads(SHIFT_TOML.format(targets=f"shift_target = {TARGET_B}")), base=tmp_path)
    assert spec.datasets[0].shift_target_names == ("site-b",)
    no_target = parse_spec(tomllib.loads(SHIFT_TOML.format(targets="")), base=tmp_path)
    assert no_target.datasets[0].shift_targets == ()


def test_shift_targets_survive_the_round_trip_through_the_records(tmp_path):
    spec = parse_spec(tomllib.loads(SHIFT_TOML.format(targets=f"shift_target = [{TARGET_B}, {TARGET_C}]")),
                      base=tmp_path)
    plain = spec_to_dict(spec)
    assert [t["name"] for t in plain["datasets"][0]["shift_targets"]] == ["site-b", "site-c"]
    again = spec_from_dict(plain)
    assert again == spec and isinstance(again.datasets[0].shift_targets, tuple)
    # a run folder written before several targets embedded one `shift_target` table (or None)
    legacy = spec_to_dict(spec)
    entry = legacy["datasets"][0]
    entry["shift_target"] = entry.pop("shift_targets")[0]
    assert spec_from_dict(legacy).datasets[0].shift_target_names == ("site-b",)
    entry["shift_target"] = None
    assert spec_from_dict(legacy).datasets[0].shift_targets == ()


@pytest.mark.parametrize("targets,message", [
    ("shift_target = []", r"datasets\[0\].shift_target: must be a table or a non-empty array of tables"),
    ('shift_target = "site-b"', r"datasets\[0\].shift_target: must be a table or a non-empty array"),
    (f"shift_target = [{TARGET_B}, 3]", r"datasets\[0\].shift_target\[1\]: must be a table"),
    ('shift_target = [{ name = "site-b", loader = "synthetic" }]',
     r"datasets\[0\].shift_target\[0\]: missing required field 'root'"),
    ('shift_target = [{ name = "b", loader = "x", root = "r", shift_target = { name = "c", loader = "x", root = "r" } }]',
     r"datasets\[0\].shift_target\[0\]: unknown field\(s\) \['shift_target'\]"),
    (f"shift_target = [{TARGET_B}, {TARGET_B}]",
     "shift target 'site-b' of data set 'cxr' and shift target 'site-b' of data set 'cxr' are both named 'site-b'"),
    ('shift_target = { name = "cxr", loader = "synthetic", root = "b" }',
     "shift target 'cxr' of data set 'cxr' and data set 'cxr' are both named 'cxr'"),
])
def test_shift_target_errors_name_the_entry(tmp_path, targets, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(tomllib.loads(SHIFT_TOML.format(targets=targets)), base=tmp_path)


def test_a_target_name_may_not_repeat_across_data_sets(tmp_path):
    data = tomllib.loads(SHIFT_TOML.format(targets=f"shift_target = {TARGET_B}"))
    data["datasets"].append({"name": "site-b", "loader": "synthetic", "root": "x"})
    with pytest.raises(SpecError, match="data set 'site-b' and shift target 'site-b' of data set 'cxr'"):
        parse_spec(data, base=tmp_path)


def test_shift_targets_built_in_python(tmp_path):
    site_b = DatasetEntry("site-b", "synthetic", tmp_path / "b")
    one = DatasetEntry("cxr", "synthetic", tmp_path, shift_targets=site_b)  # type: ignore[arg-type]
    assert one.shift_targets == (site_b,)
    with pytest.raises(SpecError, match="dataset 'cxr': its shift target 'nested' cannot have a shift_target"):
        DatasetEntry("cxr", "synthetic", tmp_path, shift_targets=(DatasetEntry("nested", "x", tmp_path, shift_targets=(site_b,)),))
    with pytest.raises(SpecError, match="dataset 'cxr': a shift target must be a data set table"):
        DatasetEntry("cxr", "synthetic", tmp_path, shift_targets=("site-b",))  # type: ignore[arg-type]


# --- encoders that run on some data sets only (docs/decisions/0038) --------------------------------------

THREE_SETS = [{"name": n, "loader": "synthetic", "root": "data"} for n in ("derm", "fundus", "cxr")]
THREE_SETS[2] = {**THREE_SETS[2], "shift_target": {"name": "cxr-b", "loader": "synthetic", "root": "data"}}


def _specialists(**changes):
    return _minimal(encoders=["pixel_stats", "resnet18", {"name": "retfound", "datasets": ["fundus"]}],
                    datasets=THREE_SETS, **changes)


def test_an_encoder_runs_on_the_data_sets_it_names_and_the_others_on_all(tmp_path):
    spec = parse_spec(_specialists(), base=tmp_path)
    assert spec.coverage == {"derm": ("pixel_stats", "resnet18"), "fundus": ("pixel_stats", "resnet18", "retfound"),
                             "cxr": ("pixel_stats", "resnet18")}
    assert spec.encoders_on("fundus") == ["pixel_stats", "resnet18", "retfound"]
    assert not spec.complete_coverage and parse_spec(_minimal(), base=tmp_path).complete_coverage
    again = spec_from_dict(spec_to_dict(spec))  # the run records' embedded copy keeps the declaration
    assert again.coverage == spec.coverage and again.encoders[2].datasets == ("fundus",)
    # stage 2 plans only the declared (encoder, task) pairs, each with its task's shift targets
    from crs.evaluate.units import probe_units

    units = [(u.encoder, u.task, u.targets) for u in probe_units(spec)]
    assert units == [("pixel_stats", "derm", ()), ("resnet18", "derm", ()), ("pixel_stats", "fundus", ()),
                     ("resnet18", "fundus", ()), ("retfound", "fundus", ()), ("pixel_stats", "cxr", ("cxr-b",)),
                     ("resnet18", "cxr", ("cxr-b",))]


@pytest.mark.parametrize("change,message", [
    ({"encoders": ["pixel_stats", {"name": "retfound", "datasets": ["eye"]}]},
     "encoder 'retfound': 'eye' in its 'datasets' is not a data set of the spec ['derm', 'fundus', 'cxr']"),
    ({"encoders": ["pixel_stats", {"name": "retfound", "datasets": ["cxr-b"]}]},
     "encoder 'retfound': 'cxr-b' in its 'datasets' is a shift target of data set 'cxr'; name 'cxr'"),
    ({"encoders": [{"name": "panderm", "datasets": ["derm"]}, {"name": "retfound", "datasets": ["fundus"]}]},
     "no encoder runs on every data set, so there is no overall leaderboard"),
    ({"encoders": ["pixel_stats", {"name": "retfound", "datasets": ["fundus", "fundus"]}]},
     "encoder 'retfound': data sets ['fundus'] are named more than once"),
    ({"encoders": ["pixel_stats", {"name": "retfound", "datasets": []}]},
     "encoder 'retfound': field 'datasets' must be a non-empty list of str"),
    ({"encoders": ["pixel_stats", {"name": "retfound", "datasets": ["fundus"]}],
      "score": {"reference_encoder": "retfound"}},
     "score: reference_encoder 'retfound' does not run on data sets ['derm', 'cxr']; the reference must run on every "
     "data set"),
    ({"encoders": ["pixel_stats"], "encoder_defaults": {"datasets": ["derm"]}},
     "encoder_defaults: unknown field(s) ['datasets']"),
])
def test_bad_encoder_data_sets_name_the_encoder_and_the_fix(tmp_path, change, message):
    data = _minimal(datasets=THREE_SETS)
    data.update(change)
    with pytest.raises(SpecError) as error:
        parse_spec(data, base=tmp_path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_same_data_set_mistake_in_python_gives_the_toml_message(tmp_path):
    datasets = tuple(DatasetEntry(n, "synthetic", tmp_path / "data") for n in ("derm", "fundus"))
    with pytest.raises(SpecError) as from_toml:
        parse_spec(_minimal(encoders=["pixel_stats", {"name": "retfound", "datasets": ["eye"]}],
                            datasets=[{"name": n, "loader": "synthetic", "root": "data"} for n in ("derm", "fundus")]),
                   base=tmp_path)
    with pytest.raises(SpecError) as from_python:
        _python_spec(encoders=(EncoderEntry("pixel_stats"), EncoderEntry("retfound", datasets=("eye",))),
                     datasets=datasets)
    assert str(from_python.value) == str(from_toml.value)
