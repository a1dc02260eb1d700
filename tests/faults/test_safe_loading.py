"""Guard: no code path in crs can run code from a downloaded file.

Reads every module's syntax tree: each ``torch.load`` passes ``weights_only=True``, nothing passes
``trust_remote_code`` (the spec has no way to ask for it, so it is never on), and nothing unpickles
(``pickle.load(s)``, ``np.load(allow_pickle=True)``, ``torch.load`` without ``weights_only``).
Behaviour is tested elsewhere: a pickled module is refused (tests/test_encoders_loading.py::
test_pickled_module_is_refused_by_weights_only_loading); CSV paths cannot leave the data root
(tests/test_data_base.py::test_safe_join_refuses_escape, test_data_folder_check.py,
test_data_isic_aptos.py, test_data_chest.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import crs

SOURCES = sorted(Path(crs.__file__).parent.rglob("*.py"))


def calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return "?"


def keyword(call: ast.Call, name: str):
    for item in call.keywords:
        if item.arg == name:
            return item.value
    return None


def offences(source: Path) -> list[str]:
    found = []
    for call in calls(ast.parse(source.read_text(), str(source))):
        name = dotted(call.func)
        where = f"{source.name}:{call.lineno}"
        if name == "torch.load":
            value = keyword(call, "weights_only")
            if not (isinstance(value, ast.Constant) and value.value is True):
                found.append(f"{where}: torch.load without weights_only=True")
        if keyword(call, "trust_remote_code") is not None:
            found.append(f"{where}: trust_remote_code passed to {name}")
        if name in ("pickle.load", "pickle.loads", "joblib.load", "dill.load"):
            found.append(f"{where}: {name} unpickles")
        allow = keyword(call, "allow_pickle")
        if allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
            found.append(f"{where}: allow_pickle is not False")
    return found


def test_sources_were_found():
    names = {path.name for path in SOURCES}
    assert {"checkpoint.py", "hf.py", "timm_.py", "open_clip_.py", "extract.py"} <= names


def test_no_code_path_can_unpickle_or_trust_remote_code():
    assert [offence for source in SOURCES for offence in offences(source)] == []


def test_the_guard_catches_what_it_should(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch, pickle, numpy as np\n"
        "torch.load('x')\n"
        "torch.load('x', weights_only=False)\n"
        "AutoModel.from_pretrained('x', trust_remote_code=True)\n"
        "pickle.loads(b'')\n"
        "np.load('x', allow_pickle=True)\n"
        "torch.load('x', weights_only=True)\n"
    )
    assert [line.split(":")[1] for line in offences(bad)] == ["2", "3", "4", "5", "6"]
