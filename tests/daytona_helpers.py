"""The loopback Daytona (`helios.testing.daytona_fake`) as a fixture: its keys in the
environment, the SDK's build contexts stored in its folder, and its containers
gone at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helios.testing.daytona_fake import DaytonaFake, local_object_storage

#: the fake's key: long enough to be registered as a secret, and easy to grep for
KEY = "dtn-test-key-5f2c9a71e4"


@pytest.fixture
def daytona(need_docker: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[DaytonaFake]:
    with DaytonaFake(api_key=KEY) as fake, local_object_storage(fake):
        monkeypatch.setenv("DAYTONA_API_KEY", KEY)
        monkeypatch.setenv("DAYTONA_API_URL", fake.api_url)
        monkeypatch.delenv("DAYTONA_TARGET", raising=False)
        yield fake
