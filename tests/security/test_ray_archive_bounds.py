"""`--executor ray`: a trial folder comes back to the driver as one archive. The node
packs it under the bound of any download, and the driver checks its size, then its
headers, before writing a file. (The node is trusted all the same: Ray unpickles what
it sends; see the module's "Trust".) No cluster is needed to check either side."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import helios.engine.ray_executor as ray_executor
from helios.environments.shell.safe_copy import Bounds, UnsafeDownload

SMALL = Bounds(max_bytes=1 << 20, max_entries=100)


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_executor, "Bounds", lambda: SMALL, raising=False)


@pytest.mark.usefixtures("small_bounds")
def test_a_node_never_packs_a_folder_past_the_bound(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    folder.mkdir()
    (folder / "big.bin").write_bytes(os.urandom(3 << 20))
    with pytest.raises(UnsafeDownload, match="not sent to the driver"):
        ray_executor._pack(folder)


@pytest.mark.usefixtures("small_bounds")
def test_the_driver_refuses_an_oversized_archive_before_writing(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("trial/big.bin")
        info.size = 3 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    batch = SimpleNamespace(run_dir=tmp_path / "run")
    unit = SimpleNamespace(label="t #1", folder="001_t")
    outcome = SimpleNamespace(archive=buffer.getvalue(), node="10.0.0.9")
    with pytest.raises(UnsafeDownload, match=r"from node 10\.0\.0\.9"):
        ray_executor._RayBatch._unpack(batch, unit, outcome)  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()
