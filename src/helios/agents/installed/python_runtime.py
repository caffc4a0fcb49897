"""A relocatable copy of the host's Python, for agents installed from PyPI: the
sandbox then needs no Python of its own (Debian's slim images have none), only a
glibc as new as the host's.

`bundle(dest)` copies the interpreter Helios runs on (its executable, its
`libpython` when shared, the standard library less its tests and GUI parts) and
the shared libraries that it and the installed packages' extensions load, other
than glibc's own, into `dest`: `python`, `lib/pythonX.Y/` and `deps/`. The
sandbox runs `dest/python` with `PYTHONHOME=dest` and `LD_LIBRARY_PATH=dest/deps`
(see `launch_env`).
"""

from __future__ import annotations

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


def version() -> str:
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def bundle(dest: Path, *, packages: Path | None = None) -> None:
    """Copy the host's Python into `dest`, with the shared libraries that its
    extensions and those under `packages` need."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    dest.mkdir(parents=True, exist_ok=True)
    executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    shutil.copy2(executable, dest / "python")
    shutil.copytree(stdlib, dest / "lib" / version(), ignore=shutil.ignore_patterns(*_SKIPPED),
                    symlinks=False, dirs_exist_ok=True)  # fmt: skip
    deps = dest / "deps"
    deps.mkdir(exist_ok=True)
    objects = [executable, *(dest / "lib" / version()).rglob("*.so")]
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
