"""``crs cache ls | verify | gc`` on a cache URL: through its local mirror, pulled first (decision 0191).

The mirror (:func:`crs.spec.mirror_folder`) is brought in step with the URL by a pull (every object
compared by size and MD5, what differs fetched), so the folder commands then see what the bucket holds.
``gc`` also deletes the stale groups' objects from the bucket, under the URL's object lock, in the
reverse of a push's order so the bucket stays a valid cache at every moment: first the group metadata
(the group stops being listed), then the completion flags (no chunk reads as valid), then the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crs.cache.inspect import GcReport, collect_garbage
from crs.cache.object_lock import ObjectLock
from crs.cache.remote import open_url, remote_error
from crs.cache.store import CacheError
from crs.cache.sync_record import save_record
from crs.cache.transfer import TransferReport, _phase, _relative_objects, pull
from crs.cache.writer import DONE_SUFFIX
from crs.spec import mirror_folder, url_scheme


def is_url(value: Any) -> bool:
    return url_scheme(value) is not None


def pull_mirror(url: str, *, verify: bool = False) -> tuple[Path, TransferReport]:
    """The URL's mirror folder, pulled; chunk data is checked only with ``verify``."""
    folder = mirror_folder(url)
    return folder, pull(url, folder, verify=verify)


def collect_url_garbage(url: str, dry_run: bool = False) -> tuple[GcReport, TransferReport]:
    """``crs cache gc`` on a URL: the mirror's stale groups, deleted from the bucket, then from the mirror."""
    folder, pulled = pull_mirror(url)
    chosen = collect_garbage(folder, dry_run=True)
    if dry_run or not chosen.removed:
        return GcReport(chosen.removed, chosen.kept_locked, dry_run), pulled
    remote, root = open_url(url)
    with ObjectLock(url):  # no push interleaves: a group is never half deleted under a writer's objects
        present = _relative_objects(remote, root, url)
        doomed: list[str] = []
        for removal in chosen.removed:
            prefix = f"{Path(removal.store).name}/encoders/{removal.encoder}/{removal.fingerprint}/"
            doomed += [relative for relative in present if relative.startswith(prefix)]
        for encoder in {f"{Path(r.store).name}/encoders/{r.encoder}/" for r in chosen.removed}:
            left = [r for r in present if r.startswith(encoder) and r != f"{encoder}zarr.json" and r not in doomed]
            if not left and f"{encoder}zarr.json" in present:  # its last group goes: the encoder node too, as locally
                doomed.append(f"{encoder}zarr.json")
        _delete_in_order(remote, root, url, doomed)
    done = collect_garbage(folder)
    save_record(folder, url, {}, tuple(doomed))
    return GcReport(chosen.removed, done.kept_locked, False), pulled


def _delete_in_order(remote: Any, root: str, url: str, doomed: list[str]) -> None:
    """Group metadata (shallowest first), then flags, then data and array metadata: push's order reversed."""
    def rank(relative: str) -> tuple[int, int]:
        if relative.endswith("zarr.json") and _is_group(remote, root, relative, url):
            return (0, relative.count("/"))
        return (1, 0) if f"{DONE_SUFFIX}/" in relative else (2, 0)

    ranks = {relative: rank(relative) for relative in doomed}
    for position in range(3):  # one step at a time: a step starts once the one before has landed
        paths = [f"{root}/{r}" for r in sorted(doomed, key=lambda r: (ranks[r], r)) if ranks[r][0] == position]
        if paths:
            _delete_step(remote, paths, url)


def _delete_step(remote: Any, paths: list[str], url: str) -> None:
    """Delete ``paths`` (one bulk request per thousand); objects already gone are no error (a re-run)."""
    try:
        remote.rm(paths)
    except FileNotFoundError:
        pass
    except Exception as error:
        raise remote_error(url, "deleting stale groups from", error) from None


def _is_group(remote: Any, root: str, relative: str, url: str) -> bool:
    try:
        return _phase(relative, remote.cat_file(f"{root}/{relative}"))[0] == 2
    except FileNotFoundError:
        return False
    except Exception as error:
        raise remote_error(url, "reading", error) from None


def refuse_kept_local(report: TransferReport, what: str) -> None:
    """A command that must see the bucket's bytes stops when the mirror kept unpushed files instead."""
    if report.kept_local:
        raise CacheError(
            f"{what}: {len(report.kept_local)} file(s) of the mirror {report.destination} differ from {report.source} "
            f"and were written here since the last push or pull (first: {report.kept_local[0]}), so the URL's "
            f"copies were not read; `crs cache push {report.destination} {report.source}` sends them, or "
            f"`crs cache pull {report.source} {report.destination} --overwrite` takes the URL's; then re-run")
