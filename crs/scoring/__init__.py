"""The Clinical Reliability Score from run records: formula, bootstraps, rankings, stability, result."""
