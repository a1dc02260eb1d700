"""Fixtures of the object-storage cache tests: a real local S3 API server (tests/s3_server.py) and a fresh
bucket per test, reached through the standard AWS environment (``AWS_ENDPOINT_URL`` and the keys)."""

from __future__ import annotations

import uuid

import pytest

from s3_server import CREDENTIALS, S3Server, server_for_tests, stop_on_sigterm


@pytest.fixture(scope="session")
def s3_server():
    """The session's S3 server; the tests skip, saying why, only when moto cannot be started."""
    try:
        import boto3  # noqa: F401  (moto's own dependency; the tests make buckets with it)
        import s3fs  # noqa: F401
    except ImportError as error:
        pytest.skip(f"s3fs or moto[server] is not installed ({error}); pip install -e '.[dev]'")
    try:
        server: S3Server = server_for_tests()
    except RuntimeError as error:
        pytest.skip(f"no local S3 server: {error}")
    stop_on_sigterm(server)
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The AWS environment pointing at the test server (endpoint and test keys), as a user would set it."""
    import s3fs

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.url)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()  # a cached filesystem would keep another test's endpoint
    yield s3_server.url
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_bucket(s3_env):
    """A new, empty bucket on the test server: ``s3://<name>``."""
    import boto3

    name = f"crs-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_env).create_bucket(Bucket=name)
    return f"s3://{name}"
