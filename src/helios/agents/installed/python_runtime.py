"""A relocatable copy of the host's Python, for agents installed from PyPI: the
sandbox then needs no Python of its own (Debian's slim images have none), only a
glibc as new as the host's.

`bundle(dest)` copies the interpreter Helios runs on, or another one of the host's
(`python=`, for an agent that needs a newer Python: `find(version)`), with its
`libpython` when shared and its standard library less its tests and GUI parts, and
the shared libraries that it and the installed packages' extensions load, other
than glibc's own, into `dest`: `python`, `lib/pythonX.Y/` and `deps/`. The
sandbox runs `dest/python` with `PYTHONHOME=dest` and `LD_LIBRARY_PATH=dest/deps`
(see `launch_env`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

#: parts of the standard library an agent never imports (tests, GUI, build files)
_SKIPPED = ("test", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip",
            "lib2to3", "config-*")  # fmt: skip
#: glibc's own libraries: the sandbox's glibc serves them
_GLIBC = re.compile(r"^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec|"
                    r"ld-linux[-\w]*)\.so")  # fmt: skip
#: libraries the standard library's GUI and terminal modules load (skipped above)
_UNNEEDED = re.compile(r"^(libtk|libtcl|libX|libxcb|libfontconfig|libfreetype|libpng)")
_LDD_LINE = re.compile(r"^\s*(\S+) => (/\S+) \(0x[0-9a-f]+\)$")


#: what an interpreter says of itself: its executable, standard library and version
_DESCRIBE = ("import json, sys, sysconfig; print(json.dumps([getattr(sys, '_base_executable', "
             "sys.executable), sysconfig.get_paths()['stdlib'], '%d.%d' % sys.version_info[:2]]))")


def version() -> str:
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def find(minor: str) -> Path | None:
    """The host's Python `minor` ("3.13"): Helios's own when it is that version, else
    the first that runs and says it is that version of `python3.13` on PATH and the
    pyenv builds of it (`PYENV_ROOT`, else ~/.pyenv; newest first); None when the
    host has none. (A pyenv shim on PATH fails unless that version is selected.)"""
    if f"python{minor}" == version():
        return Path(sys.executable)
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    builds = sorted(root.glob(f"{minor}.*/bin/python{minor}"), reverse=True,
                    key=lambda p: [int(n) if n.isdigit() else 0
                                   for n in p.parents[1].name.split(".")])  # fmt: skip
    on_path = shutil.which(f"python{minor}")
    for candidate in [*([Path(on_path)] if on_path else []), *builds]:
        try:
            if _describe(candidate)[2] == f"python{minor}":
                return candidate
        except (OSError, ValueError, subprocess.SubprocessError):
            continue
    return None


def _describe(python: Path | None) -> tuple[Path, Path, str]:
    """(executable, standard library, "pythonX.Y") of `python`, else of Helios's own."""
    if python is None:
        executable = Path(getattr(sys, "_base_executable", sys.executable))
        return executable.resolve(), Path(sysconfig.get_paths()["stdlib"]), version()
    out = subprocess.run([str(python), "-c", _DESCRIBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    executable, stdlib, minor = json.loads(out)
    return Path(executable).resolve(), Path(stdlib), f"python{minor}"


def bundle(dest: Path, *, packages: Path | None = None, python: Path | None = None) -> None:
    """Copy the host's Python (`python`, else Helios's own) into `dest`, with the
    shared libraries that its extensions and those under `packages` need."""
    executable, stdlib, name = _describe(python)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executable, dest / "python")
    shutil.copytree(stdlib, dest / "lib" / name, ignore=shutil.ignore_patterns(*_SKIPPED),
                    symlinks=False, dirs_exist_ok=True)  # fmt: skip
    deps = dest / "deps"
    deps.mkdir(exist_ok=True)
    objects = [executable, *(dest / "lib" / name).rglob("*.so")]
    if packages is not None:
        objects += packages.rglob("*.so*")
    for name, path in _shared_libraries(objects).items():
        if packages is not None and path.is_relative_to(packages):
            continue  # shipped with its wheel (a `<name>.libs` folder), found by its RPATH
        if not (deps / name).exists():
            shutil.copy2(path, deps / name)


def _shared_libraries(objects: Iterable[Path]) -> dict[str, Path]:
    """soname -> host path of every library `objects` load (ldd), less glibc's."""
    found: dict[str, Path] = {}
    for obj in objects:
        try:
            out = subprocess.run(["ldd", str(obj)], capture_output=True, text=True,
                                 timeout=30, check=False).stdout  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in out.splitlines():
            match = _LDD_LINE.match(line)
            if match is None:
                continue
            name, path = match.groups()
            if _GLIBC.match(name) or _UNNEEDED.match(name):
                continue
            found.setdefault(name, Path(path).resolve())
    return found


def launch_env(home: str) -> dict[str, str]:
    """The variables that run the copy at `home` (inside the sandbox)."""
    return {"PYTHONHOME": home, "LD_LIBRARY_PATH": f"{home}/deps"}
