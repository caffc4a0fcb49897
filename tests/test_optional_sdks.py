"""The provider SDKs (openai, anthropic) are not dependencies of Helios: the model
clients and the tool-call adapters speak the providers' HTTP APIs over aiohttp, and
only the `dev` (the tests' SDK clients of the scripted server) and `bench` extras
install them. Daytona's SDK is the `daytona` extra, imported only when a Daytona
sandbox is made. Each check runs in a fresh interpreter where the SDKs are made
unimportable (`sys.modules[name] = None`), so any import of one at import time
fails there, even though the test venv has them installed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDKS = ("openai", "anthropic")
BLOCK = (
    "import sys\nfor _name in ('openai', 'anthropic', 'daytona'):\n    sys.modules[_name] = None\n"
)


def run_without_sdks(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_core_modules_import_without_the_sdks() -> None:
    code = (
        "import helios, helios.cli, helios.cli.app, helios.models, helios.tasks,"
        " helios.datagen, helios.toolcalls, helios.toolcalls.adapters\n"
        "print('imported')\n"
    )
    result = run_without_sdks(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported"


def test_every_module_imports_without_the_sdks() -> None:
    code = (
        "import importlib, pkgutil, helios\n"
        "failed = []\n"
        "for info in pkgutil.walk_packages(helios.__path__, 'helios.'):\n"
        "    if info.name.rsplit('.', 1)[-1] == '__main__':\n"
        "        continue  # runs the CLI\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ImportError as exc:\n"
        "        failed.append(f'{info.name}: {exc}')\n"
        "print('\\n'.join(failed) or 'ok')\n"
    )
    result = run_without_sdks(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", result.stdout


def test_cli_help_without_the_sdks() -> None:
    code = "from helios.cli.entry import main\nsys.argv[0] = 'helios'\nmain()\n"
    for args in (["--help"], ["batch", "examples/tasks", "--help"], ["run", "--help"]):
        result = run_without_sdks(code, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Usage: helios" in result.stdout, args


def test_the_sdks_are_not_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {r.split("[")[0].split(">")[0].split("=")[0].strip().lower() for r in requirements}

    assert not names(project["dependencies"]) & set(SDKS)
    # the tests use both as clients of the scripted model server
    assert set(SDKS) <= names(project["optional-dependencies"]["dev"])


def test_daytona_is_an_extra_imported_only_for_its_sandboxes() -> None:
    code = (
        "import asyncio, os\n"
        "from helios.environments.registry import available_providers, provider_class\n"
        "from helios.environments.spec import SandboxSpec\n"
        "assert 'daytona' in available_providers()\n"
        "os.environ['DAYTONA_API_KEY'] = 'a-daytona-key'\n"
        "env = provider_class('daytona')(SandboxSpec(image='x'), trial_id='t', run_id='r')\n"
        "try:\n    asyncio.run(env.start())\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = run_without_sdks(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "EnvironmentUnavailable --provider daytona needs Daytona's SDK: "
        "pip install 'helios-harness[daytona]'"
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(r.startswith("daytona") for r in project["dependencies"])
    assert [r.split("==")[0] for r in project["optional-dependencies"]["daytona"]] == ["daytona"]
