"""Which sandbox engines a process starts, seen through Python's audit hooks: a
`bwrap`, a `docker` CLI or the Docker socket, Xvfb or Chromium (a desktop), a
Ray node. The test suite's conftest installs it in pytest, and this folder's
`sitecustomize` installs it in every Python subprocess that a test starts (the
CLI, worker processes, Ray's workers), which append what they start to the file
named by ENGINE_PROBE_LOG. The conftest then fails a test that started an
engine without carrying its marker (tests/engines.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

LOG_VAR = "ENGINE_PROBE_LOG"  # not HELIOS_*: tests strip those from a subprocess

_PROGRAMS = {
    "bwrap": "bwrap",
    "docker": "docker",
    "dockerd": "docker",
    "Xvfb": "desktop",
    "chromium": "desktop",
    "chromium-browser": "desktop",
    "google-chrome": "desktop",
    "raylet": "ray",
    "gcs_server": "ray",
    "ray": "ray",
}
#: programs that run another program named in their arguments
_WRAPPERS = {"prlimit", "timeout", "setsid", "nice", "env", "setpriv", "unshare", "nohup",
             "stdbuf", "ionice", "taskset"}  # fmt: skip
_DOCKER_SOCKETS = ("docker.sock",)


def _text(value: Any) -> str:
    try:
        return os.fsdecode(value)
    except TypeError:
        return str(value)


_RAY_PARTS = ("/ray/_private/", "/ray/dashboard/", "/ray/autoscaler/", "/ray/scripts/")


def _is_ray_script(word: str) -> bool:
    if any(c.isspace() for c in word):  # code given with -c, not a script's path
        return False
    return os.path.basename(word) == "ray_cluster.py" or any(p in word for p in _RAY_PARTS)


def _from_argv(argv: Any) -> str | None:
    if isinstance(argv, (str, bytes)) or argv is None:
        return None
    words = [_text(a) for a in argv]
    if not words:
        return None
    first = os.path.basename(words[0])
    if first.startswith("python"):  # a Ray node's processes, by their scripts' paths
        ray = any(_is_ray_script(w) for w in words[1:3])
        return "ray" if ray else None
    for word in words:
        base = os.path.basename(word)
        if base in _PROGRAMS:
            return _PROGRAMS[base]
        if base not in _WRAPPERS and word is words[0]:
            return None
    return None


def classify(event: str, args: tuple[Any, ...]) -> str | None:
    """The engine that this audit event starts or reaches, if any."""
    try:
        if event == "subprocess.Popen":
            return _from_argv(args[1])
        if event in ("os.posix_spawn", "os.exec"):
            return _from_argv(args[1])
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, (str, bytes)) and any(
                s in _text(address) for s in _DOCKER_SOCKETS
            ):
                return "docker"
    except Exception:  # an audit hook must never break the process it watches
        return None
    return None


_WATCHED = frozenset({"subprocess.Popen", "os.posix_spawn", "os.exec", "socket.connect"})


def install(record: Callable[[str], None]) -> None:
    """Call `record(engine)` whenever this process starts or reaches an engine."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED:
            return
        engine = classify(event, args)
        if engine is not None:
            record(engine)

    sys.addaudithook(hook)


def install_from_env() -> None:
    """In a subprocess: append each engine (once) to the file ENGINE_PROBE_LOG
    names, when it is set."""
    if not os.environ.get(LOG_VAR):
        return
    seen: set[str] = set()

    def record(engine: str) -> None:
        path = os.environ.get(LOG_VAR)
        if engine in seen or not path:
            return
        seen.add(engine)
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write(engine + "\n")
        except OSError:
            pass

    install(record)
