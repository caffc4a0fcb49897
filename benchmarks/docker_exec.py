"""One exec in docker: the `docker exec` CLI against the Engine API (aiodocker).

N containers, K execs in each, all containers at once. Prints, per exec: the wall
(machine time, as the execs overlap), this process's CPU, its children's (the CLI
processes) and the daemons' (dockerd, containerd and the shims with their runc).

    .venv/bin/python benchmarks/docker_exec.py -N 64 -K 6
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from collections.abc import Awaitable, Callable

import aiodocker

from helios._proc import run_process


def daemons_cpu() -> float:
    """CPU seconds of the docker daemons so far, their reaped children included."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                name = comm.read().strip()
            if name not in ("dockerd", "containerd") and not name.startswith("containerd-shim"):
                continue
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(map(int, fields[11:15])) / os.sysconf("SC_CLK_TCK")
    return total


async def by_cli(docker: aiodocker.Docker, cid: str, text: str) -> bytes:
    result = await run_process(["docker", "exec", "-i", "-w", "/", cid, "sh", "-c", f"echo {text}"])
    assert result.returncode == 0, result
    return result.stdout


async def by_api(docker: aiodocker.Docker, cid: str, text: str) -> bytes:
    run = await docker.containers.container(cid).exec(["sh", "-c", f"echo {text}"], workdir="/")
    out = b""
    async with run.start(detach=False) as stream:
        while (message := await stream.read_out()) is not None:
            out += message.data
    assert (await run.inspect())["ExitCode"] == 0
    return out


Exec = Callable[[aiodocker.Docker, str, str], Awaitable[bytes]]


async def measure(name: str, how: Exec, n: int, k: int, image: str) -> float:
    docker = aiodocker.Docker()
    config = {"Image": image, "Entrypoint": ["sleep"], "Cmd": ["infinity"],
              "HostConfig": {"NetworkMode": "none"}}  # fmt: skip
    ids = [(await docker.containers.run(config)).id for _ in range(n)]
    try:
        started, self0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
        kids0, daemons0 = resource.getrusage(resource.RUSAGE_CHILDREN), daemons_cpu()

        async def one(cid: str) -> None:
            for i in range(k):
                assert (await how(docker, cid, str(i))).strip() == str(i).encode()

        await asyncio.gather(*map(one, ids))
        wall, self1 = time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF)
        kids1, daemons1 = resource.getrusage(resource.RUSAGE_CHILDREN), daemons_cpu()
    finally:
        for cid in ids:
            await docker.containers.container(cid).delete(force=True, v=True)
        await docker.close()

    def cpu(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    per = 1000 / (n * k)
    print(f"{name:4} {n * k} execs, {n} at once: wall {wall * per:.1f} ms/exec, "
          f"Helios CPU {cpu(self0, self1) * per:.1f} ms, CLI CPU {cpu(kids0, kids1) * per:.1f} ms, "
          f"daemons' CPU {(daemons1 - daemons0) * per:.1f} ms", flush=True)  # fmt: skip
    return wall * per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-N", type=int, default=64, help="containers at once")
    parser.add_argument("-K", type=int, default=6, help="execs in each")
    parser.add_argument("--image", default="debian:bookworm-slim")
    args = parser.parse_args()
    walls = [asyncio.run(measure(name, how, args.N, args.K, args.image))
             for name, how in (("cli", by_cli), ("api", by_api))]  # fmt: skip
    print(f"ratio: the CLI takes {walls[0] / walls[1]:.2f}x the API's wall per exec")


if __name__ == "__main__":
    main()
