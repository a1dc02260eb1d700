"""``crs weights fetch``: download a spec's encoder weights from the Hugging Face Hub into the folder
crs reads them from (``$CRS_WEIGHTS_DIR/<encoder>/``), once, with their digests recorded.

crs itself never downloads: extraction reads local files only (``crs.encoders.weights``), so a GPU
node without internet runs what a login node fetched. Each encoder's repository and revision come
from the registry (:func:`crs.encoders.hub.hub_source`); the files keep the Hub's names, which
:func:`crs.encoders.weights.resolve` looks for. Beside them ``crs-weights.json`` records the
repository, the revision asked for, the commit it resolved to and each file's sha256 and size. A
gated repository (MedSigLIP, MedGemma, RETFound) names its licence and the page where it is
accepted. Needs ``huggingface_hub`` (the ``weights`` extra); ``HF_ENDPOINT`` and ``HF_TOKEN`` are
honoured as huggingface_hub honours them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crs.encoders.hub import FOLDER_PATTERNS, HubSource, hub_source, needs_weights, not_on_hub
from crs.encoders.hub_reach import hub_endpoint, hub_offline, unreachable
from crs.encoders.registry import EncoderError, EncoderSpec, get_spec
from crs.encoders.weights import RANDOM
from crs.spec import Spec

RECORD_FILE = "crs-weights.json"
FETCHED, SKIPPED, FAILED = "fetched", "skipped", "failed"


class FetchError(EncoderError):
    """One encoder's weights could not be fetched; the message names it and what to do."""


@dataclass(frozen=True)
class Fetched:
    """One encoder's outcome: ``status`` (fetched | skipped | failed), a one-line ``detail``, and for a
    fetch the folder, the commit and each file's sha256."""

    encoder: str
    status: str
    detail: str
    folder: Path | None = None
    commit: str = ""
    files: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.encoder}: {self.status}: {self.detail}"


def _hub():
    try:
        import huggingface_hub
    except ImportError as error:
        raise FetchError("fetching weights needs huggingface_hub: pip install 'crs[weights]' "
                         "(or pip install huggingface_hub)") from error
    return huggingface_hub


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def gated_line(spec: EncoderSpec, source: HubSource) -> str:
    """What a gated repository asks of the user, in one line."""
    return (f"{source.repo} is gated (licence: {spec.license}): accept it at {source.page} while logged in, "
            "then give huggingface_hub your token (HF_TOKEN, or `hf auth login`)")


def _download(spec: EncoderSpec, source: HubSource, folder: Path) -> list[Path]:
    """The files of ``source`` in ``folder`` (huggingface_hub skips what is there and unchanged)."""
    hub = _hub()
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        if source.folder:
            hub.snapshot_download(source.repo, revision=source.revision, local_dir=folder,
                                  allow_patterns=list(FOLDER_PATTERNS))
            found = sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.relative_to(folder).parts)
            if not (folder / "config.json").is_file():
                raise FetchError(f"encoder {spec.name!r}: {source.repo}@{source.revision} has no config.json; "
                                 f"it is not a model folder ({source.page})")
            return found
        missing = []
        for name in source.files:  # the first that exists: safetensors before a pickle
            try:
                return [Path(hub.hf_hub_download(source.repo, name, revision=source.revision, local_dir=folder))]
            except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: the Hub did not answer
                raise FetchError(f"encoder {spec.name!r}: {source.repo}: the Hub at {hub_endpoint()} stopped "
                                 "answering; try again where there is internet") from None
            except EntryNotFoundError:
                missing.append(name)
        raise FetchError(f"encoder {spec.name!r}: {source.repo}@{source.revision} holds none of {missing} "
                         f"({source.page})")
    except GatedRepoError:
        raise FetchError(f"encoder {spec.name!r}: {gated_line(spec, source)}") from None
    except RepositoryNotFoundError:
        raise FetchError(f"encoder {spec.name!r}: repository {source.repo} (revision {source.revision}) was not "
                         f"found on {hub.constants.ENDPOINT}; check the registry entry, or HF_TOKEN for a "
                         "private one") from None
    except HfHubHTTPError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise FetchError(f"encoder {spec.name!r}: {source.repo}: {first}") from None
    except OSError as error:  # no network, a full disk, a folder not writable
        raise FetchError(f"encoder {spec.name!r}: {source.repo}: {error}") from None


def _commit(source: HubSource, folder: Path, files: list[Path]) -> str:
    """The commit the revision resolved to, from huggingface_hub's metadata beside the download."""
    for path in files:
        relative = path.relative_to(folder).as_posix()
        metadata = folder / ".cache" / "huggingface" / "download" / f"{relative}.metadata"
        if metadata.is_file():
            lines = metadata.read_text().splitlines()
            if lines:
                return lines[0].strip()
    return ""


def fetch_encoder(spec: EncoderSpec, root: Path, announce: Callable[[str], None] | None = None) -> Fetched:
    """Fetch one registry entry's weights into ``root / spec.name`` and record their digests there."""
    if not needs_weights(spec):
        return Fetched(spec.name, SKIPPED, "needs no weights file")
    source = hub_source(spec)
    if source is None:
        return Fetched(spec.name, SKIPPED, not_on_hub(spec))
    folder = Path(root) / spec.name
    if spec.gated and announce is not None:
        announce(f"{spec.name}: {gated_line(spec, source)}")
    if announce is not None:
        announce(f"{spec.name}: {source.repo}@{source.revision} -> {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    files = _download(spec, source, folder)
    digests = {path.relative_to(folder).as_posix(): sha256(path) for path in files}
    commit = _commit(source, folder, files)
    sizes = {name: (folder / name).stat().st_size for name in digests}
    record = {
        "encoder": spec.name, "repo": source.repo, "revision": source.revision, "commit": commit,
        "page": source.page, "licence": spec.license, "gated": spec.gated,
        "files": {name: {"sha256": digest, "bytes": sizes[name]} for name, digest in digests.items()},
    }
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    size = sum(sizes.values())
    return Fetched(spec.name, FETCHED, f"{len(files)} file(s), {size:,} bytes, commit {commit[:12] or 'unknown'}, "
                                       f"sha256 in {folder / RECORD_FILE}", folder, commit, digests)


def require_hub() -> None:
    """Raise :class:`FetchError` in one line when the Hub cannot be reached from here (one short request)."""
    _hub()
    endpoint = hub_endpoint()
    if hub_offline():
        raise FetchError("HF_HUB_OFFLINE is set, so huggingface_hub will not download; unset it to fetch weights")
    why = unreachable(endpoint)
    if why is not None:
        raise FetchError(f"cannot reach the Hugging Face Hub at {endpoint} ({why}); run `crs weights fetch` "
                         "on a machine with internet (a login node), or set HF_ENDPOINT to a mirror you can reach")


def fetch_spec(spec: Spec, root: Path, encoders: list[str] | None = None,
               announce: Callable[[str], None] | None = None) -> list[Fetched]:
    """Every encoder of ``spec`` (or ``encoders``) fetched into ``root``; one :class:`Fetched` each, in spec
    order. An encoder with weights given in the spec (a path, or ``random``) or not in the registry
    (imported features) is skipped with the reason; a failed one does not stop the others. Before the
    first download the Hub is asked once whether it is there (:func:`require_hub`): a machine without
    network gets one line at once, not minutes of retries per file."""
    wanted = list(spec.encoder_names) if encoders is None else list(encoders)
    unknown = sorted(set(wanted) - set(spec.encoder_names))
    if unknown:
        raise FetchError(f"encoders {unknown} are not in the spec (it has {list(spec.encoder_names)})")
    entries = {entry.name: entry for entry in spec.encoders}
    done = []
    hub_checked = False
    for name in wanted:
        weights = entries[name].weights
        if weights == RANDOM:
            done.append(Fetched(name, SKIPPED, "weights = 'random' in the spec"))
            continue
        if weights is not None:
            done.append(Fetched(name, SKIPPED, f"weights given in the spec: {weights}"))
            continue
        try:
            registered = get_spec(name)
        except EncoderError:
            done.append(Fetched(name, SKIPPED, "not in the registry (imported features need no weights)"))
            continue
        if not hub_checked and needs_weights(registered) and hub_source(registered) is not None:
            require_hub()
            hub_checked = True
        try:
            done.append(fetch_encoder(registered, root, announce))
        except FetchError as error:
            done.append(Fetched(name, FAILED, str(error)))
    return done
