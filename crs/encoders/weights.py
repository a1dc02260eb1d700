"""Find an encoder's weights on local disk (never the network) and fingerprint them.

Order: an explicit path (``--weights PATH``), then ``$CRS_WEIGHTS_DIR/<encoder name>/`` (where
``crs weights fetch`` puts them, under the Hub's file names) or a file named after the spec's
``weights_file`` there, then the Hugging Face cache (read with
``local_files_only``, as with ``HF_HUB_OFFLINE=1``). If none has them the error names the file
expected and where to download it on a machine with internet access.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from crs.encoders.registry import EncoderError, EncoderSpec

RANDOM = "random"
RANDOM_SEED = 0
WEIGHT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".ckpt")


class WeightsNotFoundError(EncoderError):
    """No local weights for an encoder; the message names the file expected and where to get it."""


def weights_dir() -> Path | None:
    value = os.environ.get("CRS_WEIGHTS_DIR")
    return Path(value).expanduser() if value else None


def _in_weights_dir(spec: EncoderSpec, want_folder: bool, hf_filenames: tuple[str, ...] = ()) -> Path | None:
    root = weights_dir()
    if root is None:
        return None
    folder = root / spec.name
    if want_folder:
        return folder if (folder / "config.json").is_file() else None
    candidates = []
    if spec.weights_file:
        candidates += [folder / spec.weights_file, root / spec.weights_file]
    candidates += [folder / f"model{s}" for s in WEIGHT_SUFFIXES]
    candidates += [folder / name for name in hf_filenames]  # as `crs weights fetch` saves them: the Hub's names
    candidates += [root / f"{spec.name}{s}" for s in WEIGHT_SUFFIXES]
    return next((c for c in candidates if c.is_file()), None)


def hf_cached_file(repo_id: str, filename: str) -> Path | None:
    """A file from the local Hugging Face cache, or None; never touches the network."""
    try:
        from huggingface_hub import try_to_load_from_cache  # optional: only a local cache look-up
    except ImportError:
        return None
    found = try_to_load_from_cache(repo_id, filename)
    return Path(found) if isinstance(found, str) else None


def hf_cached_snapshot(repo_id: str) -> Path | None:
    """A repository snapshot folder from the local Hugging Face cache, or None."""
    try:
        from huggingface_hub import snapshot_download  # optional: only a local cache look-up
    except ImportError:
        return None
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # huggingface_hub raises several types for "not cached"
        return None


def resolve(spec: EncoderSpec, weights: str | os.PathLike | None, *, want_folder: bool = False,
            hf_repo: str | None = None, hf_filenames: tuple[str, ...] = ()) -> Path:
    """The local weights path for ``spec`` (a file, or a folder when ``want_folder``)."""
    if weights is not None:
        path = Path(weights).expanduser()
        if not path.exists():
            raise WeightsNotFoundError(f"encoder {spec.name!r}: weights path {path} does not exist")
        if want_folder and not (path / "config.json").is_file():
            raise WeightsNotFoundError(
                f"encoder {spec.name!r}: {path} must be a folder with config.json and the model weights "
                "(a Hugging Face model snapshot)")
        return path
    found = _in_weights_dir(spec, want_folder, hf_filenames)
    if found is not None:
        return found
    if hf_repo:
        if want_folder:
            found = hf_cached_snapshot(hf_repo)
        else:
            found = next((p for p in (hf_cached_file(hf_repo, f) for f in hf_filenames) if p), None)
        if found is not None:
            return found
    raise WeightsNotFoundError(missing_message(spec, want_folder, hf_repo, hf_filenames))


def missing_message(spec: EncoderSpec, want_folder: bool, hf_repo: str | None, hf_filenames: tuple[str, ...]) -> str:
    root = weights_dir()
    where = f"$CRS_WEIGHTS_DIR ({root})" if root else "$CRS_WEIGHTS_DIR (unset)"
    if want_folder:
        expected = f"a folder {spec.name}/ with config.json and model.safetensors in {where}"
    else:
        name = spec.weights_file or (hf_filenames[0] if hf_filenames else "model.safetensors")
        expected = f"{spec.name}/{name} in {where}"
    get = spec.weights_url or (f"https://huggingface.co/{hf_repo}" if hf_repo else "the model's authors")
    cache = f", or the Hugging Face cache for {hf_repo}" if hf_repo else ""
    gated = " (gated: accept the licence on the model page first)" if spec.gated else ""
    fetch = "; `crs weights fetch SPEC` downloads them there" if hf_repo or spec.hub_repo else ""
    return (f"no local weights for encoder {spec.name!r}: expected {expected}{cache}, or pass the weights path; "
            f"download from {get}{gated}{fetch}, or use weights='random' for a smoke test")


def file_digest(path: Path) -> str:
    """sha256 of a weights file, or of the sorted (name, sha256) list of a folder's weight files."""
    path = Path(path)
    if path.is_file():
        sha = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                sha.update(block)
        return sha.hexdigest()
    files = sorted(p for p in path.rglob("*") if p.is_file() and (p.suffix in WEIGHT_SUFFIXES or p.name == "config.json"))
    if not files:
        raise WeightsNotFoundError(f"weights folder {path} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    sha = hashlib.sha256()
    for file in files:
        sha.update(f"{file.relative_to(path).as_posix()}:{file_digest(file)}\n".encode())
    return sha.hexdigest()
