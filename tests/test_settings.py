"""`helios.settings`: every HELIOS_* variable declared and read in one module, and
what a run records of them (URLs without their userinfo)."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from helios import settings as settings_module
from helios.settings import BY_NAME, VARIABLES, HeliosSettings

from .thin_door import PromptDoor, PromptUnit

SRC = Path(__file__).resolve().parent.parent / "src" / "helios"
ROOT = Path(__file__).resolve().parent.parent
#: the table of variables; the other pages and the README may name them too
SETTINGS_PAGE = ROOT / "docs" / "getting-started.md"


def _env_reads(tree: ast.AST, constants: dict[str, str]) -> list[str]:
    """The HELIOS_* names (and the other declared ones: DAYTONA_*, TAVILY_*) a module
    reads from the process environment."""
    found = []

    def name_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    for node in ast.walk(tree):
        target: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv", "pop"):
                owner = func.value
                if (isinstance(owner, ast.Attribute) and owner.attr == "environ") or (
                    isinstance(owner, ast.Name) and owner.id in ("os", "environ", "env")
                ):
                    target = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "environ":
                target = node.slice
        if (target is not None and (name := name_of(target))
                and (name.startswith("HELIOS_") or name in BY_NAME)):  # fmt: skip
            found.append(name)
    return found


def _constants(tree: ast.Module) -> dict[str, str]:
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }  # fmt: skip


def test_no_module_but_settings_reads_a_helios_variable() -> None:
    reads = {}
    for path in SRC.rglob("*.py"):
        if path == SRC / "settings.py":
            continue
        tree = ast.parse(path.read_text("utf-8"))
        if names := _env_reads(tree, _constants(tree)):
            reads[str(path.relative_to(SRC))] = names
    assert reads == {}


def test_the_scan_sees_each_way_of_reading() -> None:
    # Guards the guard: the three spellings, directly and through a constant.
    source = (
        'import os\nSWITCH = "HELIOS_X"\n'
        'a = os.environ.get("HELIOS_A")\nb = os.getenv("HELIOS_B")\n'
        'c = os.environ["HELIOS_C"]\nd = os.environ.get(SWITCH)\n'
        'e = env.get("TAVILY_API_KEY")\nf = os.environ.get("PATH")\n'
    )
    tree = ast.parse(source)
    assert sorted(_env_reads(tree, _constants(tree))) == [
        "HELIOS_A", "HELIOS_B", "HELIOS_C", "HELIOS_X", "TAVILY_API_KEY",
    ]  # fmt: skip
    assert (SRC / "settings.py").read_text().count("env.get(v.name)") == 1


def test_every_variable_is_in_the_docs() -> None:
    table = SETTINGS_PAGE.read_text("utf-8").split("## Settings from the environment", 1)[1]
    assert [v.name for v in VARIABLES if f"| `{v.name}` |" not in table] == []
    # and neither the README nor the docs name a variable Helios does not declare
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {n for p in pages for n in re.findall(r"\bHELIOS_[A-Z_]+[A-Z]\b", p.read_text("utf-8"))}
    internal = {"HELIOS_REQUIRE_DOCKER", "HELIOS_REQUIRE_BWRAP", "HELIOS_REQUIRE_ROOT_TESTS",
                "HELIOS_TEST_WORKERS", "HELIOS_TEST_TIMELINE"}  # fmt: skip
    from helios.agents.installed.acp import GIVEN  # what an ACP agent is given

    assert named - internal - set(GIVEN) - {v.name for v in VARIABLES} == set()


def test_a_run_records_what_is_set_without_a_urls_password() -> None:
    env = {
        "HELIOS_DOCKER_NETWORK": "bridge",
        "HELIOS_SEARXNG_URL": "https://ada:s3cret@search.example/",
        "HELIOS_LOCAL_SHELL": "python",
        "HELIOS_WEB_TIMEOUT": "",  # empty counts as unset
        "HELIOS_NOT_OURS": "x",
        "PATH": "/bin",
    }
    read = HeliosSettings.read(env)
    recorded = read.recorded()
    assert recorded == {
        "HELIOS_DOCKER_NETWORK": "bridge",
        "HELIOS_LOCAL_SHELL": "python",
        "HELIOS_SEARXNG_URL": "https://search.example/",
    }
    assert "s3cret" not in repr(recorded)
    # only what changes results is part of the identity a resume checks
    assert read.identity() == {
        "HELIOS_DOCKER_NETWORK": "bridge", "HELIOS_SEARXNG_URL": "https://search.example/",
    }  # fmt: skip
    assert read.searxng_url == "https://ada:s3cret@search.example/"  # used as given


def test_daytonas_key_is_a_secret_never_recorded() -> None:
    from helios.secrets import redact

    key = "dtn-settings-" + uuid.uuid4().hex
    read = HeliosSettings.read({
        "DAYTONA_API_KEY": key, "DAYTONA_API_URL": "https://u:pw-" + key[:8] + "@d.example/api",
        "DAYTONA_TARGET": "eu",
    })  # fmt: skip
    assert read.daytona_api_key == key and read.daytona_target == "eu"
    assert read.recorded() == {"DAYTONA_API_URL": "https://d.example/api", "DAYTONA_TARGET": "eu"}
    assert read.identity() == {}
    assert redact(f"failed with {key}") == "failed with [REDACTED]"


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, 20.0), ("7.5", 7.5), ("abc", 20.0), ("-1", 20.0), ("inf", 20.0)]
)
def test_numbers_fall_back_to_their_default(raw: str | None, expected: float) -> None:
    env = {} if raw is None else {"HELIOS_WEB_TIMEOUT": raw}
    assert HeliosSettings.read(env).number("HELIOS_WEB_TIMEOUT", 20.0) == expected


def test_a_setting_set_in_process_is_seen_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIOS_DOCKER", "/opt/docker")
    assert settings_module.current().docker_cli == "/opt/docker"
    monkeypatch.delenv("HELIOS_DOCKER")
    assert settings_module.current().docker_cli == "docker"
    with pytest.raises(KeyError, match="HELIOS_NOPE is not a Helios setting"):
        settings_module.current().get("HELIOS_NOPE")


@pytest.mark.parametrize(
    ("raw", "mode"),
    [(None, "auto"), ("1", "auto"), ("0", "off"), ("python", "python"), ("x", "auto")],
)
def test_the_local_shell_switch(raw: str | None, mode: str) -> None:
    env = {} if raw is None else {"HELIOS_LOCAL_SHELL": raw}
    assert HeliosSettings.read(env).local_shell == mode


class _SettingsDoor(PromptDoor):
    """Each result says which sandbox folder the settings give where the unit ran."""

    async def run_unit(self, unit: PromptUnit, ctx: Any, slot: Any) -> dict[str, Any]:
        from helios.settings import current

        result = await super().run_unit(unit, ctx, slot)
        return {**result, "dir": current().sandbox_dir, "pid": os.getpid()}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_run_reads_its_settings_once_even_in_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """Changing a HELIOS_* variable in-process after the run started changes nothing
    it does (its worker processes, started later with the new environment, included):
    it runs with what its run.json records."""
    from helios.engine import ConcurrencyConfig, OutputsConfig, Run, RunConfig, SandboxConfig
    from helios.settings import current

    first, later = str(tmp_path / "first"), str(tmp_path / "later")
    monkeypatch.setenv("HELIOS_SANDBOX_DIR", first)
    records: list[dict[str, Any]] = []

    async def go() -> None:
        async with Run() as run:
            monkeypatch.setenv("HELIOS_SANDBOX_DIR", later)
            await run.open(RunConfig(
                kind="prompts", sandbox=SandboxConfig(provider="null"),
                concurrency=ConcurrencyConfig(in_flight=2, processes=processes),
                outputs=OutputsConfig(fixed=tmp_path / "run"),
            ))  # fmt: skip
            assert current().sandbox_dir == first
            await run.drive(
                _SettingsDoor(), [PromptUnit(f"good {i}", i) for i in range(4)],
                finish=lambda outcome: records.extend(outcome.recorded),
            )  # fmt: skip

    asyncio.run(go())
    assert [r["dir"] for r in records] == [first] * 4
    assert (os.getpid() in {r["pid"] for r in records}) == (processes == 1)
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["helios_settings"]
    assert recorded["HELIOS_SANDBOX_DIR"] == first
    assert current().sandbox_dir == later  # outside a run: the environment as it is


def test_tavilys_key_comes_from_the_runs_snapshot_and_is_never_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The web toolset reads TAVILY_* from the run's settings (as `HeliosSettings`
    declares them), not the process environment: a key changed in-process mid-run is
    not seen; the key is a secret, in no file of the run."""
    from helios.agents.toolsets.hermes.web_backends import TavilyBackend, web_settings
    from helios.engine import OutputsConfig, Run, RunConfig, SandboxConfig
    from helios.secrets import redact

    key = "tvly-snapshot-" + uuid.uuid4().hex
    monkeypatch.delenv("HELIOS_SEARXNG_URL", raising=False)
    monkeypatch.setenv("TAVILY_API_KEY", key)
    monkeypatch.setenv("TAVILY_API_URL", "http://127.0.0.1:9/tavily")
    seen: list[object] = []

    async def go() -> None:
        async with Run() as run:
            monkeypatch.setenv("TAVILY_API_KEY", "tvly-changed-mid-run")
            await run.open(RunConfig(
                kind="prompts", sandbox=SandboxConfig(provider="null"),
                outputs=OutputsConfig(fixed=tmp_path / "run"), identity={"a": 1},
            ))  # fmt: skip
            seen.append(web_settings().backend)
            await run.drive(PromptDoor(), [PromptUnit("good", 1)], finish=lambda _: None)

    asyncio.run(go())
    (backend,) = seen
    assert isinstance(backend, TavilyBackend)
    assert (backend.api_key, backend.url) == (key, "http://127.0.0.1:9/tavily")
    assert redact(f"sent {key}") == "sent [REDACTED]"
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["helios_settings"]["TAVILY_API_URL"] == "http://127.0.0.1:9/tavily"
    assert "TAVILY_API_KEY" not in run_json["helios_settings"]
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert key not in path.read_text("utf-8", errors="replace"), path
    # outside a run: the environment as it is now
    assert web_settings().backend == TavilyBackend("http://127.0.0.1:9/tavily",
                                                   "tvly-changed-mid-run")  # fmt: skip
