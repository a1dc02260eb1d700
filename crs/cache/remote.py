"""A cache location in object storage (``s3://bucket/prefix``): its fsspec filesystem, opened with the
standard credential chain, and its errors as one line.

Credentials and the endpoint come from where the client library looks for them (for S3: the
``AWS_*`` environment including ``AWS_ENDPOINT_URL`` for S3-compatible services, ``~/.aws`` config
files, instance roles). crs never takes them as arguments, so it never writes them anywhere.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from crs.cache.store import CacheError
from crs.spec import URL_EXTRAS, url_scheme

LOCAL_SCHEMES = frozenset({"file", "local"})


def open_url(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and the root path inside it of ``url``; CacheError naming the fix when crs
    cannot serve it (not a URL, a local ``file://``, an unknown scheme, a filesystem not installed)."""
    import fsspec

    scheme = url_scheme(url)
    if scheme is None:
        raise CacheError(f"{url} is not a URL (scheme://bucket/prefix); give e.g. s3://bucket/prefix")
    if scheme in LOCAL_SCHEMES:
        raise CacheError(f"{url} is a local path; give the folder itself, not a {scheme}:// URL")
    package, extra = URL_EXTRAS.get(scheme, (None, None))
    if package is not None and importlib.util.find_spec(package) is None:
        raise CacheError(f"{url}: {package} is not installed; pip install 'crs[{extra}]'")
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise CacheError(f"{url}: crs cannot serve {scheme}:// URLs (no fsspec filesystem); use s3://") from None
    except ImportError as error:
        raise CacheError(f"{url}: the {scheme}:// filesystem is not installed ({error})") from None
    filesystem, root = fsspec.core.url_to_fs(url)
    return filesystem, root.rstrip("/")


def remote_error(url: str, action: str, error: BaseException) -> CacheError:
    """One line for a failed request: what was being done, where, and what the server or network said."""
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    if "SlowDown" in reason or "reduce your request rate" in reason:  # s3fs and botocore retried it already
        return CacheError(
            f"{action} {url} failed: the server kept throttling (503 SlowDown) past the client's retries "
            f"({type(error).__name__}: {reason}); wait, or allow more retries (AWS_MAX_ATTEMPTS, "
            "AWS_RETRY_MODE=adaptive), then re-run: it resumes"
        )
    return CacheError(
        f"{action} {url} failed ({type(error).__name__}: {reason}); check the bucket, the network and the "
        "AWS environment (AWS_ENDPOINT_URL, credentials), then re-run: it resumes"
    )
