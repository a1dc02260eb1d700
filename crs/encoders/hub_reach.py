"""Can this machine reach the Hugging Face Hub? One short request, before any download is tried.

Without it, ``crs weights fetch`` on a machine with no network spent minutes in huggingface_hub's retries
(five per file, backing off to 8 s; 169 s for four encoders), then reported each repository as holding
none of its files. The endpoint is huggingface_hub's own (``HF_ENDPOINT``), and the request goes
through the proxies the environment names (``HTTPS_PROXY``, ``NO_PROXY``), as the download would.
"""

from __future__ import annotations

import urllib.error
import urllib.request

REACH_TIMEOUT_S = 5.0


def hub_endpoint() -> str:
    """The Hub address huggingface_hub downloads from (``HF_ENDPOINT``, default https://huggingface.co)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def hub_offline() -> bool:
    """True when huggingface_hub is told to stay offline (``HF_HUB_OFFLINE=1``)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def unreachable(endpoint: str, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """Why ``endpoint`` cannot be reached (one short phrase), or None when it answers at all.

    Any HTTP answer, an error status included, means the server is there; only a failure to connect, a
    name that does not resolve, a dropped connection or no answer within ``timeout`` seconds is unreachable.
    """
    request = urllib.request.Request(f"{endpoint}/api/models", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as error:
        reason = error.reason
        return str(getattr(reason, "strerror", None) or reason)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as error:  # a connection reset or closed before any answer
        return str(error.strerror or error)
