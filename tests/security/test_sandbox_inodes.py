"""A file flood in a local sandbox (issue 18): the sandbox's tmpfs holds as many inodes
as its size allows (`local_limits.inodes`), in / and in /dev/shm alike. Before, a
64 MB sandbox took 3,085,492 empty files (the kernel's default: half the host's RAM
pages), 3.1 GB of unswappable slab per sandbox.

On docker (not tested here, measured for the README): /dev/shm's tmpfs inodes are
charged to the container's memory cgroup (a 256 MB container is OOM-killed near
250,000 files); the writable layer (overlay2 on ext4) has no per-container inode
bound, only the inode table of the filesystem under /var/lib/docker."""

from __future__ import annotations

import pytest

from helios.environments.local import LocalEnvironment
from helios.environments.local.limits import runs_as_root
from helios.environments.spec import SandboxSpec

from ..sandbox_helpers import in_sandbox

#: far fewer than the kernel's default, far more than the bound of a small sandbox
TRIES = 100_000
FLOOD = """
for folder in /tmp /dev/shm; do
  i=0
  while [ $i -lt {tries} ] && true > $folder/f$i 2>/dev/null; do i=$((i+1)); done
  echo $i
  true > $folder/one-more || true
  find $folder -name 'f*' -delete
done
"""


@pytest.mark.usefixtures("need_bwrap")
def test_a_file_flood_stops_at_the_sandboxs_inode_bound() -> None:
    if not runs_as_root():
        pytest.skip("the sandbox's root is a tmpfs only when Helios runs as root")
    found: list[str] = []

    async def body(env: LocalEnvironment) -> None:
        result = await env.exec(FLOOD.format(tries=TRIES), cwd="/", timeout=120)
        found.extend([result.stdout, result.stderr])

    in_sandbox(body, spec=SandboxSpec(storage_mb=16))
    stdout, stderr = found
    counts = [int(n) for n in stdout.split()]
    # 16,384 inodes (the floor), less the sandbox's own folders; each folder in turn
    assert len(counts) == 2 and all(10_000 < n < 16_384 for n in counts), counts
    for folder in ("/tmp", "/dev/shm"):
        assert f"{folder}/one-more: No space left on device" in stderr, stderr
