"""A real one-node SLURM on this machine for the cluster tests (started by .ci/run, or here when it is not).

The ``slurm`` fixture lives in ``local_slurm`` (a plugin module, so a test can run it in a pytest of
its own): it uses a running scheduler only when it is the suite's, starts one with
``.ci/slurm/start.sh`` otherwise, and stops what it started however the run ends (SIGTERM included).
The tests skip only when the suite's cluster cannot be installed or started, with start.sh's reason.
"""

from __future__ import annotations

from local_slurm import slurm  # noqa: F401  (the session fixture)
