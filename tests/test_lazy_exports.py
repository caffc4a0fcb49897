"""The lazy packages (`helios.lazy.lazy_exports`): each name is written once, as an
import under `TYPE_CHECKING` (what mypy sees), and that line is what the package
exports at run time, imported on first use."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ["helios", "helios.engine", "helios.datagen", "helios.environments.docker",
            "helios.environments.local", "helios.environments.daytona",
            "helios.environments.desktop"]  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_of_a_lazy_package_resolves_to_what_it_imports(package: str) -> None:
    from helios.lazy import type_checking_imports

    module = importlib.import_module(package)
    table = type_checking_imports(vars(module))
    assert table, "no names read from its TYPE_CHECKING block"
    assert set(table) <= set(module.__all__) <= set(table) | {"__version__"}
    assert set(module.__all__) <= set(dir(module))
    if package.endswith("daytona"):
        pytest.importorskip("daytona")
    for name, (where, attribute) in table.items():
        assert getattr(module, name) is getattr(importlib.import_module(where), attribute)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        getattr(module, "Nope")  # noqa: B009


def test_a_lazy_name_is_imported_only_when_used() -> None:
    code = (
        "import sys, helios.engine as e\n"
        "assert 'helios.engine.batch' not in sys.modules\n"
        "from helios.engine import BatchService\n"
        "assert 'helios.engine.batch' in sys.modules and e.BatchService is BatchService\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_install_of_compiled_files_only_resolves_its_lazy_names(tmp_path: Path) -> None:
    """Some images ship .pyc files without sources: the lazy names come from the code."""
    import compileall
    import shutil

    import helios

    copy = tmp_path / "helios"
    shutil.copytree(Path(helios.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    assert compileall.compile_dir(copy, legacy=True, quiet=1)
    for source in copy.rglob("*.py"):
        source.unlink()
    code = (
        "import helios, helios.engine as e\n"
        "from helios.lazy import _compiled_imports\n"
        "assert helios.__file__.endswith('.pyc'), helios.__file__\n"
        "table = _compiled_imports(vars(e))\n"
        "assert table['BatchService'] == ('helios.engine.batch', 'BatchService'), table\n"
        "from helios import ParallelRunner, discover_tasks\n"
        "from helios.engine import BatchService\n"
        "print(','.join(sorted(helios.__all__)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [",".join(sorted(helios.__all__))]
