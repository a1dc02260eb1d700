"""The corruption suite version: it enters the feature-cache fingerprint.

Bump it whenever any definition, severity constant, seed derivation or suite membership changes,
so a cache built with the old suite is never reused silently.
"""

SUITE_VERSION = "2025.3"  # 2025.3: per-pixel noise on 8-bit levels drawn by exact alias tables
