"""Fixtures of the tool-call tests (pytester is enabled by the top-level conftest).

Tests marked `espeak` need espeak-ng: they skip without it, except in CI (CI=true)
or with HELIOS_REQUIRE_ESPEAK=1, where a missing espeak-ng fails them
(scripts/setup-system.sh installs it).
"""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "espeak: needs espeak-ng (offline speech)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("espeak") is None or shutil.which("espeak-ng") is not None:
        return
    if os.environ.get("HELIOS_REQUIRE_ESPEAK") == "1" or os.environ.get("CI") == "true":
        pytest.fail("espeak-ng is required here but not installed (apt-get install espeak-ng)",
                    pytrace=False)  # fmt: skip
    pytest.skip("espeak-ng not installed")
