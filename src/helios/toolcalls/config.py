"""The YAML config of `helios toolcalls`: a pydantic schema, and its components built.

    synthesizer: espeak                  # a short name, `module:Class`, null (text mode)
    agent:                               # or {name: ..., params: {...}}
      name: http
      params: {url: "http://127.0.0.1:8000/agent", parser: json}
    evaluator: {name: exact, params: {ignore_extra_args: true}}
    runs: 3
    max_concurrency: 4
    tests:
      - id: book_flight
        prompt: "Book a flight from NYC to LA"      # or prompts: [...]
        expect: [{name: book_flight, arguments: {from_city: NYC}}]
        runs: 5                                     # optional, per test

The components may also sit under `pipeline:`. A bad config raises one
`InputError` that names the file, the key path and what is wrong.

A config is data: it may name a built-in, an installed plugin (the entry point groups
`helios.toolcalls.agents`, `.synthesizers`, `.evaluators`, `.parsers`) or an import
path, and an import path must resolve to a component of its kind: a class that
defines the kind's method (an agent's `async def run` or `run_text`, a synthesizer's
`async def synthesize`, an evaluator's `evaluate`, a parser's `parse`), or an object
that has it (a function made an agent with `@helios.toolcalls.agent`). Anything else,
`subprocess:Popen` say, is refused before it is called: naming a callable in a YAML
file never runs it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helios.errors import InputError
from helios.safe_yaml import load_yaml
from helios.toolcalls.plan import MAX_RUNS, Case, too_many_runs
from helios.toolcalls.types import new_call

SYNTHESIZERS = {
    "espeak": "helios.toolcalls.synthesizers.espeak:EspeakSynthesizer",
    "openai": "helios.toolcalls.synthesizers.openai:OpenAISynthesizer",
    "google": "helios.toolcalls.synthesizers.google:GoogleSynthesizer",
}
AGENTS = {
    "http": "helios.toolcalls.adapters.http:HttpAgent",
    "websocket": "helios.toolcalls.adapters.websocket:WebSocketAgent",
    "openai": "helios.toolcalls.adapters.openai:OpenAIAgent",
    "openai-realtime": "helios.toolcalls.adapters.openai_realtime:OpenAIRealtimeAgent",
    "gemini": "helios.toolcalls.adapters.gemini:GeminiAgent",
    "gemini-live": "helios.toolcalls.adapters.gemini:GeminiLiveAgent",
    "model": "helios.toolcalls.adapters.model:ModelAgent",
}
EVALUATORS = {"exact": "helios.toolcalls.evaluators.exact:ExactEvaluator"}
PARSERS = {
    "openai": "helios.toolcalls.parsers.openai:OpenAIResponseParser",
    "gemini": "helios.toolcalls.parsers.gemini:GeminiResponseParser",
    "json": "helios.toolcalls.parsers.mapping:JsonResponseParser",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Component(Strict):
    #: a built-in short name or `module:Class` (`module.Class` works too)
    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


ComponentSpec = str | Component


def _bounded_runs(runs: int | None) -> int | None:
    if runs is not None and runs > MAX_RUNS:
        raise ValueError(too_many_runs(runs))
    return runs


class Expected(Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class TestSpec(Strict):
    id: str = Field(min_length=1)
    prompt: str | None = Field(default=None, min_length=1)
    prompts: list[str] | None = Field(default=None, min_length=1)
    description: str = ""
    expect: list[Expected] = Field(default_factory=list)
    runs: int | None = Field(default=None, ge=1)

    _runs = field_validator("runs")(_bounded_runs)

    @model_validator(mode="after")
    def _one_source(self) -> TestSpec:
        if (self.prompt is None) == (self.prompts is None):
            raise ValueError("give exactly one of prompt or prompts")
        return self

    def texts(self) -> list[str]:
        return [self.prompt] if self.prompt is not None else list(self.prompts or [])


class ToolcallsConfig(Strict):
    synthesizer: ComponentSpec | None = "espeak"
    agent: ComponentSpec
    evaluator: ComponentSpec = "exact"
    tests: list[TestSpec] = Field(min_length=1)
    runs: int = Field(default=1, ge=1)
    max_concurrency: int | None = Field(default=None, ge=1)

    _runs = field_validator("runs")(_bounded_runs)

    @model_validator(mode="before")
    @classmethod
    def _flatten_pipeline(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("pipeline"), dict):
            pipeline = data["pipeline"]
            clash = sorted(set(pipeline) & set(data) - {"pipeline"})
            if clash:
                raise ValueError(f"{clash} given both at the top and under pipeline")
            data = {**{k: v for k, v in data.items() if k != "pipeline"}, **pipeline}
        return data

    @model_validator(mode="after")
    def _unique_ids(self) -> ToolcallsConfig:
        seen: set[str] = set()
        for test in self.tests:
            if test.id in seen:
                raise ValueError(f"duplicate test id {test.id!r}")
            seen.add(test.id)
        return self

    @model_validator(mode="after")
    def _bounded_total(self) -> ToolcallsConfig:
        total = self.total_runs()
        if total > MAX_RUNS:
            raise ValueError(too_many_runs(total))
        return self

    def total_runs(self, runs_override: int | None = None) -> int:
        return sum(len(test.texts()) * (runs_override or test.runs or self.runs)
                   for test in self.tests)  # fmt: skip

    def cases(self, runs_override: int | None = None) -> list[Case]:
        """Every prompt with its runs (an override past MAX_RUNS in all is bad input)."""
        total = self.total_runs(runs_override)
        if runs_override is not None and total > MAX_RUNS:
            raise InputError(f"--runs {runs_override:,}: {too_many_runs(total)}", field="--runs")
        cases: list[Case] = []
        for test in self.tests:
            runs = runs_override or test.runs or self.runs
            expect = tuple(new_call(e.name, e.arguments) for e in test.expect)
            cases.extend(Case(text, expect, runs, test.id) for text in test.texts())
        return cases


def _key_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part not in ("str", "Component", "function-after[_one_source(), TestSpec]"):
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def load_config(path: str | Path) -> ToolcallsConfig:
    file = Path(path)
    try:
        text = file.read_text("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the config: {exc.strerror or exc}", file=str(file)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 ({exc.reason})", file=str(file)) from None
    try:
        # Bounded (depth, nodes after alias expansion, finite numbers) before
        # anything walks the data: see helios.safe_yaml.
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML: {problem}", file=str(file), line=line) from None
    if not isinstance(data, dict):
        raise InputError("the config must be a mapping (synthesizer, agent, tests, ...)",
                         file=str(file))  # fmt: skip
    try:
        return ToolcallsConfig.model_validate(data)
    except ValidationError as exc:
        error = _most_telling(exc.errors())
        where = _key_path(tuple(error["loc"]))
        message = str(error["msg"]).removeprefix("Value error, ")
        raise InputError(f"{where}: {message}", file=str(file), field=None) from None


def _most_telling(errors: list[Any]) -> Any:
    """With unions (`str | {name, params}`) pydantic reports every branch: prefer the
    mapping branch's complaint when the value was a mapping."""
    for error in errors:
        if "Component" in [str(part) for part in error["loc"]]:
            return error
    return errors[0]


# -- building the components ----------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """What a component of one kind must define (one of `methods`), and whether it is
    awaited."""

    noun: str
    group: str
    methods: tuple[str, ...]
    is_async: bool


KINDS = {
    "agent": Kind("an agent", "helios.toolcalls.agents", ("run", "run_text"), True),
    "synthesizer": Kind("a synthesizer", "helios.toolcalls.synthesizers", ("synthesize",), True),
    "evaluator": Kind("an evaluator", "helios.toolcalls.evaluators", ("evaluate",), False),
    "parser": Kind("a response parser", "helios.toolcalls.parsers", ("parse",), False),
}


def _plugin(reference: str, kind: Kind) -> Any:
    """The installed plugin called `reference` in the kind's entry point group, or None."""
    for point in entry_points(group=kind.group):
        if point.name == reference:
            try:
                return point.load()
            except Exception as exc:
                raise ValueError(f"plugin {point.value} cannot be loaded ({exc})") from None
    return None


def _defines(owner: Any, kind: Kind) -> bool:
    """Whether `owner` (a class or an object) has one of the kind's methods, async
    when the kind awaits it."""
    for name in kind.methods:
        method = inspect.getattr_static(owner, name, None)
        if isinstance(method, staticmethod | classmethod):
            method = method.__func__
        if not inspect.isfunction(method):
            continue
        if not kind.is_async or inspect.iscoroutinefunction(method):
            return True
    return False


def check_kind(target: Any, reference: str, kind: Kind) -> None:
    """ValueError unless `target` is a component of `kind`: a class that defines the
    kind's method, or an object whose class does (never a bare callable)."""
    owner = target if inspect.isclass(target) else type(target)
    if inspect.isclass(target) and _defines(owner, kind):
        return
    if not inspect.isclass(target) and not inspect.isroutine(target) and _defines(owner, kind):
        return
    method = " or ".join(("async def " if kind.is_async else "def ") + m for m in kind.methods)
    hint = " (decorate the function with @helios.toolcalls.agent)" if (
        kind.noun == "an agent" and inspect.iscoroutinefunction(target)) else ""  # fmt: skip
    raise ValueError(f"{reference!r} is not {kind.noun}: a config names a class that "
                     f"defines {method}, or such an object{hint}")  # fmt: skip


def resolve(reference: str, builtins: dict[str, str], kind: Kind | None = None) -> Any:
    """The component `reference` names: a built-in, an installed plugin, or an import
    path (checked to be one of `kind`, when given, before anything calls it)."""
    if kind is not None and reference not in builtins and ":" not in reference:
        found = _plugin(reference, kind)
        if found is not None:
            check_kind(found, reference, kind)
            return found
    target = _import(builtins.get(reference, reference), reference, builtins)
    if kind is not None:
        check_kind(target, reference, kind)
    return target


def _import(target: str, reference: str, builtins: dict[str, str]) -> Any:
    module_name, sep, attribute = target.partition(":")
    if not sep:
        module_name, _, attribute = target.rpartition(".")
    if not module_name or not attribute:
        known = ", ".join(sorted(builtins))
        raise ValueError(f"unknown name {reference!r}: use one of {known}, or module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (module_name == missing or module_name.startswith(missing + ".")):
            raise ValueError(f"cannot import {module_name!r} ({exc})") from None
        # The module itself is missing (not one it imports): say where it is looked for.
        where = module_name.replace(".", "/")
        raise ValueError(
            f"cannot import {module_name!r}: no {where}.py next to the config file "
            "or on the Python path"
        ) from None
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} ({exc})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{module_name!r} has no attribute {attribute!r}") from None


def build(spec: ComponentSpec, builtins: dict[str, str], where: str, file: str, kind: str) -> Any:
    component = Component(name=spec) if isinstance(spec, str) else spec
    try:
        target = resolve(component.name, builtins, KINDS[kind])
    except ValueError as exc:
        raise InputError(f"{where}.name: {exc}", file=file) from None
    params = dict(component.params)
    if kind == "agent" and isinstance(params.get("parser"), str | dict):
        params["parser"] = build(_as_spec(params["parser"], f"{where}.params.parser", file),
                                 PARSERS, f"{where}.params.parser", file, "parser")  # fmt: skip
    if not inspect.isclass(target):  # an object of its kind, e.g. an @agent function
        if params:
            raise InputError(f"{where}.params: {component.name} is an object, not a class",
                             file=file)  # fmt: skip
        return target
    try:
        return target(**params)
    except Exception as exc:  # the component's own complaint about its params
        raise InputError(f"{where}.params: {type(exc).__name__}: {exc}", file=file) from None


def _as_spec(value: Any, where: str, file: str) -> ComponentSpec:
    try:
        return value if isinstance(value, str) else Component.model_validate(value)
    except ValidationError as exc:
        raise InputError(f"{where}: {exc.errors()[0]['msg']}", file=file) from None


def build_components(config: ToolcallsConfig, file: str | Path) -> tuple[Any, Any, Any]:
    """(synthesizer or None, agent, evaluator); `module:Class` resolves next to the file too."""
    folder = str(Path(file).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = str(file)
    synthesizer = None
    if config.synthesizer is not None and config.synthesizer != "none":
        synthesizer = build(config.synthesizer, SYNTHESIZERS, "synthesizer", name, "synthesizer")
    agent = build(config.agent, AGENTS, "agent", name, "agent")
    evaluator = build(config.evaluator, EVALUATORS, "evaluator", name, "evaluator")
    return synthesizer, agent, evaluator
