"""One exec in docker: the `docker exec` CLI, the Engine API (aiodocker), and the
stream to Helios's shell server as the container's init (what a trial uses).

N containers, K execs in each, all containers at once. Prints, per exec: the wall
(machine time, as the execs overlap), this process's CPU, its children's (the CLI
processes; for the stream, the `docker run -i` that carries it) and the daemons'
(dockerd, containerd and the shims with their runc).

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
        except OSError:
            continue
        if name in ("dockerd", "containerd") or name.startswith("containerd-shim"):
            total += process_cpu(int(pid))
    return total


def process_cpu(pid: int) -> float:
    """CPU seconds of one process so far, its reaped children included (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(map(int, fields[11:15])) / os.sysconf("SC_CLK_TCK")


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

    kids = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
    return report(name, n, k, wall, (self0, self1), kids, daemons1 - daemons0)


async def measure_stream(n: int, k: int, image: str) -> float:
    """The same execs through DockerEnvironment with its shell server as the init."""
    from helios.environments.docker import DockerEnvironment
    from helios.environments.spec import SandboxSpec

    spec = SandboxSpec(image=image, workdir="/")
    envs = [DockerEnvironment(spec, trial_id=f"b{i}", run_id="bench-exec") for i in range(n)]
    await asyncio.gather(*(env.start() for env in envs))
    try:
        assert all(env._shell is not None for env in envs), "no shell server (no static build?)"
        # the `docker run -i` processes run on: their CPU from /proc, not getrusage
        clis = [env._shell.proc.pid for env in envs if env._shell and env._shell.proc]
        started, self0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
        clis0, daemons0 = sum(map(process_cpu, clis)), daemons_cpu()

        async def one(env: DockerEnvironment) -> None:
            for i in range(k):
                assert (await env.exec(f"echo {i}")).stdout.strip() == str(i)

        await asyncio.gather(*map(one, envs))
        wall, self1 = time.monotonic() - started, resource.getrusage(resource.RUSAGE_SELF)
        clis1, daemons1 = sum(map(process_cpu, clis)), daemons_cpu()
    finally:
        await asyncio.gather(*(env.stop() for env in envs))
    return report("stream", n, k, wall, (self0, self1), clis1 - clis0, daemons1 - daemons0)


def report(name: str, n: int, k: int, wall: float,
           own: tuple[resource.struct_rusage, resource.struct_rusage],
           kids: float, daemons: float) -> float:  # fmt: skip
    def cpu(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    (self0, self1), per = own, 1000 / (n * k)
    print(f"{name:4} {n * k} execs, {n} at once: wall {wall * per:.1f} ms/exec, "
          f"Helios CPU {cpu(self0, self1) * per:.1f} ms, CLI CPU {kids * per:.1f} ms, "
          f"daemons' CPU {daemons * per:.1f} ms", flush=True)  # fmt: skip
    return wall * per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-N", type=int, default=64, help="containers at once")
    parser.add_argument("-K", type=int, default=6, help="execs in each")
    parser.add_argument("--image", default="debian:bookworm-slim")
    args = parser.parse_args()
    walls = [asyncio.run(measure(name, how, args.N, args.K, args.image))
             for name, how in (("cli", by_cli), ("api", by_api))]  # fmt: skip
    walls.append(asyncio.run(measure_stream(args.N, args.K, args.image)))
    print(f"ratio: the CLI takes {walls[0] / walls[1]:.2f}x the API's wall per exec")
    print(f"ratio: the API takes {walls[1] / walls[2]:.2f}x the stream's wall per exec")


if __name__ == "__main__":
    main()
