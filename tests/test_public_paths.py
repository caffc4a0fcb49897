"""Every path parameter of the public API takes `str | Path` (issue 21, point 1).

The parameters are found by introspection, so a new one is checked too: every
name exported from `helios`, `helios.toolcalls` and `helios.datagen`, and the
settings the runners' `**kwargs` go to. A parameter or field is a path one when its
type mentions `Path`. A function's or method's annotation must then name `str`
too; a settings dataclass (whose attribute stays a `Path`) must turn a str into a
Path; a pydantic field must validate a str into a Path.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from rich.console import Console

from helios.models.services import ModelOptions
from helios.tasks.settings import TaskBatchSettings

ROOTS = ("helios", "helios.toolcalls", "helios.datagen")
#: where the runners' `**kwargs` go (ParallelRunner → TaskBatchSettings and its
#: ModelOptions, BatchRunner → GenerateSettings; run_concurrent → run_cases is exported)
KWARGS_TARGETS: tuple[type, ...] = (TaskBatchSettings, ModelOptions)
#: what Helios makes and hands back, never takes: their paths are Paths
OUTPUTS = {"helios.BatchResult", "helios.datagen.GenerateResult"}
#: required fields of a settings dataclass that are not paths, to build one
REQUIRED = {"GenerateSettings": {"batch_size": 1, "run_name": "r"}}


def _mentions_path(tp: Any) -> bool:
    return tp is Path or any(_mentions_path(arg) for arg in typing.get_args(tp))


def _mentions_str(tp: Any) -> bool:
    return tp is str or any(_mentions_str(arg) for arg in typing.get_args(tp))


def _own(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "")).startswith("helios")


def _exported() -> Iterator[tuple[str, Any]]:
    for root in ROOTS:
        module = importlib.import_module(root)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue  # submodules (helios.toolcalls.parsers, ...): their names are
                # exported by the root too
            yield f"{root}.{name}", value
    for cls in KWARGS_TARGETS:
        yield f"{cls.__module__}.{cls.__name__}", cls


def _callables(name: str, obj: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    if inspect.isfunction(obj):
        yield name, obj
        return
    if not inspect.isclass(obj) or not _own(obj):
        return
    if not dataclasses.is_dataclass(obj) and not issubclass(obj, pydantic.BaseModel):
        yield f"{name}.__init__", obj.__init__
    for attr, member in vars(obj).items():
        function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
        if not attr.startswith("_") and inspect.isfunction(function):
            yield f"{name}.{attr}", function


def _dataclasses(
    name: str, obj: Any, seen: set[type] | None = None
) -> Iterator[tuple[str, type]]:
    """`obj` if it is a settings dataclass, and the dataclasses its fields hold (each
    once: `ModelOptions.others` holds more `ModelOptions`)."""
    seen = set() if seen is None else seen
    if not (inspect.isclass(obj) and dataclasses.is_dataclass(obj) and _own(obj)):
        return
    if obj in seen:
        return
    seen.add(obj)
    yield name, obj
    hints = typing.get_type_hints(obj)
    for item in dataclasses.fields(obj):
        for tp in (hints[item.name], *typing.get_args(hints[item.name])):
            if inspect.isclass(tp) and dataclasses.is_dataclass(tp) and _own(tp):
                yield from _dataclasses(f"{tp.__module__}.{tp.__name__}", tp, seen)


def path_parameters() -> list[tuple[str, str, Any, Any]]:
    """(where, parameter, its type, the callable or class) for every path parameter."""
    found: dict[str, tuple[str, str, Any, Any]] = {}
    for name, obj in _exported():
        if name in OUTPUTS:
            continue
        for where, function in _callables(name, obj):
            for param, tp in typing.get_type_hints(function).items():
                if param != "return" and _mentions_path(tp):
                    found[f"{where}({param})"] = (where, param, tp, function)
        for where, cls in _dataclasses(name, obj):
            hints = typing.get_type_hints(cls)
            for item in dataclasses.fields(cls):
                if item.init and _mentions_path(hints[item.name]):
                    found[f"{where}.{item.name}"] = (where, item.name, hints[item.name], cls)
        if inspect.isclass(obj) and issubclass(obj, pydantic.BaseModel) and _own(obj):
            for field_name, info in obj.model_fields.items():
                if _mentions_path(info.annotation):
                    found[f"{name}.{field_name}"] = (name, field_name, info.annotation, obj)
    return [found[key] for key in sorted(found)]


PARAMETERS = path_parameters()


def test_discovery_finds_the_known_path_parameters() -> None:
    """The walk reaches what issue 21 names (an empty walk would check nothing)."""
    found = {f"{where.rsplit('.', 1)[-1]}:{param}" for where, param, _, _ in PARAMETERS}
    known = {
        "__init__:output_dir",  # ParallelRunner
        "__init__:dataset_file",  # BatchRunner
        "__init__:prices",  # ModelAgent
        "GenerateSettings:output_dir",
        "GenerateSettings:prices",
        "TaskBatchSettings:output_dir",
        "TaskBatchSettings:resume",
        "ModelOptions:prices",
        "run_cases:output_dir",
        "discover_tasks:root",
    }
    assert known <= found, sorted(known - found)


@pytest.mark.parametrize(
    ("where", "param", "tp", "owner"), PARAMETERS, ids=[f"{w}:{p}" for w, p, _, _ in PARAMETERS]
)
def test_path_parameter_takes_a_str(
    where: str, param: str, tp: Any, owner: Any, tmp_path: Path
) -> None:
    if inspect.isclass(owner) and issubclass(owner, pydantic.BaseModel):
        value = pydantic.TypeAdapter(tp).validate_python("some/where")
        assert isinstance(value, Path), f"{where}.{param}: a str stays {type(value).__name__}"
    elif inspect.isclass(owner) and dataclasses.is_dataclass(owner):
        required = {
            item.name: REQUIRED.get(owner.__name__, {}).get(item.name, "some/where")
            for item in dataclasses.fields(owner)
            if item.init
            and item.default is dataclasses.MISSING
            and item.default_factory is dataclasses.MISSING
        }
        made = owner(**{**required, param: "some/where"})
        value = getattr(made, param)
        assert isinstance(value, Path), f"{where}.{param}: a str stays {type(value).__name__}"
        assert value == Path("some/where")
    else:
        assert _mentions_str(tp), f"{where}: {param} is typed {tp}, not str | Path"


def test_batch_runner_takes_str_paths(tmp_path: Path) -> None:
    """The stumble itself: `BatchRunner(output_dir="data")` raised TypeError."""
    from helios.datagen import BatchRunner

    dataset = tmp_path / "p.jsonl"
    dataset.write_text('{"prompt": "hi"}\n')
    runner = BatchRunner(
        dataset_file=str(dataset), batch_size=1, run_name="r", output_dir=str(tmp_path / "data"),
        prices=str(tmp_path / "prices.json"), console=Console(file=io.StringIO()),
    )  # fmt: skip
    assert runner.settings.run_dir == tmp_path / "data" / "r"
    assert runner.result.run_dir == tmp_path / "data" / "r"
    assert runner.settings.prices == tmp_path / "prices.json"
