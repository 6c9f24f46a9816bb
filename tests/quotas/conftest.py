"""The quota tests share the usage tests' app under the test client."""

from __future__ import annotations

from ..web.conftest import make_client  # noqa: F401 - the fixture
