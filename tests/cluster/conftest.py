"""One local Ray for every cluster test (starting Ray takes seconds; each test opens its own nodes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray", reason="condukt.ray needs the [ray] extra")


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """A local Ray (2 CPUs, no dashboard) for the session, shut down at its end."""
    import condukt.ray

    condukt.ray.init()
    try:
        yield
    finally:
        ray.shutdown()
