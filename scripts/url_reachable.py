"""Exit 0 when URL answers at all (any HTTP status), 1 when it cannot be reached; standard library only.

`make install` runs it before crs is installed, to choose PyTorch's CPU wheel index when that index
can be reached and the default index when it cannot (decision 0164). Proxies come from the
environment (HTTPS_PROXY, NO_PROXY), as pip reads them.
"""

import sys
import urllib.error
import urllib.request

TIMEOUT_S = 10


def main(url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=TIMEOUT_S):
            return 0
    except urllib.error.HTTPError:  # the server answered: it is reachable
        return 0
    except (OSError, ValueError):  # refused, no such host, no answer in time, a malformed URL
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
