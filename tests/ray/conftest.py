"""One local Ray for the cluster tests (starting Ray takes seconds; each test opens its own nodes)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest.importorskip("ray", reason="condukt.ray needs the [ray] extra (pip install '.[test]' brings it)")


@pytest.fixture(scope="package")
def local_ray() -> Iterator[None]:
    """A local Ray (2 CPUs, no dashboard) for this package's tests, shut down after them.

    Package-scoped, not session-scoped: Ray sets variables in ``os.environ``
    (``RAY_AUTH_MODE``...) that ``condukt.ray.shutdown`` takes back, and the
    other tests must not run with them.
    """
    import condukt.ray

    before = dict(os.environ)
    condukt.ray.init()
    try:
        yield
    finally:
        condukt.ray.shutdown()
        assert dict(os.environ) == before
