"""A run's saved config: the door's settings as one JSON tree in run.json, and back.

Every door's settings are dataclasses (`TaskBatchSettings`, `GenerateSettings`, with
`ModelOptions`, `GenerationConfig`, `RunLabels` inside). `dump_config` writes one as
JSON, field by field, with no list kept by hand:
- a field whose metadata is `NOT_SAVED` belongs to one invocation (quiet, --resume,
  --force, a live view) and is left out;
- a secret never is written: a field or key named like one (`api_key`, `…_token`,
  `password`) is left out, a URL loses its userinfo (`secrets.public_url`), and any
  registered secret left in a string is redacted;
- a path is written absolute.

`load_fields` reads a dump back against the same dataclass, generically (its fields
and their type hints): an unknown key, a value of the wrong type, a tree nested too
deep or too large is one `InputError` naming the file and the field.

`merged` is the one rule of `--resume RUN_DIR` for every door: a setting this
invocation changed (a flag given again: it differs from what the command makes with
every flag at its default, or the flag has the field's name) is kept; every other
setting is the saved one. An endpoint (`ENDPOINTS`) is never taken from the folder:
`saved_endpoints` names those it records, for the caller's refusal.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from helios.errors import InputError
from helios.secrets import public_url, redact

#: the version of the `config` object run.json holds (absent: a run of before it)
CONFIG_VERSION = 1
VERSION_KEY = "config_version"
CONFIG_KEY = "config"
#: a field's metadata: the field is one invocation's, not the run's (not saved)
NOT_SAVED: Mapping[str, Any] = types.MappingProxyType({"saved": False})
#: settings that say where this machine connects: never taken from a run folder
ENDPOINTS = ("base_url", "ray_address")
#: the names of secrets: never written
_SECRET = re.compile(r"(^|_)(api_key|key|token|password|secret)$", re.IGNORECASE)
#: how deep a saved config may nest, and how many values it may hold
MAX_DEPTH = 24
MAX_VALUES = 200_000

T = TypeVar("T")


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def saved_fields(cls: Any) -> list[Any]:
    """The fields of a settings dataclass that a run's config keeps."""
    return [f for f in fields(cls) if f.metadata.get("saved", True) and not is_secret(f.name)]


def dump_config(value: Any) -> Any:
    """`value` (a settings dataclass, or any JSON-like value) as JSON, with no secret."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: dump_config(getattr(value, f.name)) for f in saved_fields(type(value))}
    if isinstance(value, Mapping):
        return {str(k): dump_config(v) for k, v in value.items() if not is_secret(str(k))}
    if isinstance(value, list | tuple | set | frozenset):
        return [dump_config(item) for item in value]
    if isinstance(value, Path):
        return redact(str(value.absolute()))
    if isinstance(value, str):
        return redact(public_url(value) if "://" in value else value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value))


# -- reading a dump back ----------------------------------------------------------------
class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where
        self.values = 0

    def fail(self, field: str, message: str) -> InputError:
        return InputError(message, file=self.where, field=field)

    def load(self, cls: Any, data: Any, path: str, depth: int) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(path, f"expected an object, got {_kind(data)}")
        known = {f.name: f for f in saved_fields(cls)}
        hints = get_type_hints(cls)
        loaded: dict[str, Any] = {}
        for key, value in data.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in known:
                raise self.fail(where, f"unknown field of {cls.__name__}")
            loaded[key] = self.convert(hints[key], value, where, depth + 1)
        return loaded

    def convert(self, hint: Any, value: Any, path: str, depth: int) -> Any:
        self.values += 1
        if depth > MAX_DEPTH:
            raise self.fail(path, f"nested deeper than {MAX_DEPTH} levels")
        if self.values > MAX_VALUES:
            raise self.fail(path, f"more than {MAX_VALUES:,} values: not a run's settings")
        origin, args = get_origin(hint), get_args(hint)
        if hint is Any:
            return self.plain(value, path, depth)
        if origin in (Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            errors = []
            for arg in (a for a in args if a is not type(None)):
                try:
                    return self.convert(arg, value, path, depth)
                except InputError as exc:
                    errors.append(exc)
            if len(errors) == 1:
                raise errors[0]
            raise self.fail(path, f"not a valid value: {_short(value)}")
        if origin is Literal:
            if value in args and not isinstance(value, bool):
                return value
            raise self.fail(path, f"expected one of {', '.join(map(str, args))}, got "
                                  f"{_short(value)}")  # fmt: skip
        if hint is bool:
            return self.expect(value, bool, path)
        if hint is int:
            return self.expect(value, int, path)
        if hint is float:
            return float(self.expect(value, (int, float), path))
        if hint is str:
            return self.expect(value, str, path)
        if hint is Path:
            return Path(self.expect(value, str, path))
        if origin is tuple and args and args[-1] is not Ellipsis:  # tuple[str, str]
            items = self.expect(value, list, path)
            if len(items) != len(args):
                raise self.fail(path, f"expected {len(args)} items, got {len(items)}")
            return tuple(self.convert(a, v, f"{path}[{i}]", depth + 1)
                         for i, (a, v) in enumerate(zip(args, items, strict=True)))  # fmt: skip
        if origin is tuple:  # tuple[str, ...]
            items = self.expect(value, list, path)
            return tuple(self.convert(args[0] if args else Any, v, f"{path}[{i}]", depth + 1)
                         for i, v in enumerate(items))  # fmt: skip
        if origin in (list, Sequence):
            items = self.expect(value, list, path)
            item = args[0] if args else Any
            return [self.convert(item, v, f"{path}[{i}]", depth + 1) for i, v in enumerate(items)]
        if origin in (dict, Mapping):
            mapping = self.expect(value, dict, path)
            item = args[1] if len(args) == 2 else Any
            return {k: self.convert(item, v, f"{path}.{k}", depth + 1) for k, v in mapping.items()}
        if is_dataclass(hint) and isinstance(hint, type):
            loaded = self.load(hint, value, path, depth)
            try:
                return hint(**loaded)
            except (TypeError, ValueError, InputError) as exc:
                raise self.fail(path, f"not valid: {exc}") from None
        return self.plain(value, path, depth)

    def expect(self, value: Any, kind: type | tuple[type, ...], path: str) -> Any:
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            name = kind.__name__ if isinstance(kind, type) else "number"
            raise self.fail(path, f"expected {name}, got {_kind(value)}")
        return value

    def plain(self, value: Any, path: str, depth: int) -> Any:
        """A JSON value of any shape (an agent's settings), bounded like the rest."""
        if isinstance(value, dict):
            return {k: self.convert(Any, v, f"{path}.{k}", depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self.convert(Any, v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return value


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_fields(cls: Any, data: Any, where: str, path: str = CONFIG_KEY) -> dict[str, Any]:
    """The fields of `cls` a saved config holds, converted to their types (nested
    settings as their dataclasses); an InputError naming `where` and the field for
    anything that does not fit."""
    return _Reader(where).load(cls, data, path, 0)


def saved_config(run: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The `config` object of a run's run.json; None for a run of before it."""
    version = run.get(VERSION_KEY)
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"expected a positive int, got {_short(version)}", file=where,
                         field=VERSION_KEY)  # fmt: skip
    if version > CONFIG_VERSION:
        raise InputError(f"config version {version} was written by a newer Helios (this "
                         f"one reads {CONFIG_VERSION}): upgrade to resume it", file=where,
                         field=VERSION_KEY)  # fmt: skip
    config = run.get(CONFIG_KEY)
    if not isinstance(config, dict):
        raise InputError(f"expected an object, got {_kind(config)}", file=where,
                         field=CONFIG_KEY)  # fmt: skip
    return config


def saved_endpoints(data: Any, depth: int = 0) -> dict[str, str]:
    """The endpoints a saved config names anywhere (`ENDPOINTS`: the first of each)."""
    found: dict[str, str] = {}
    if depth > MAX_DEPTH:
        return found
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(
        data, list) else ()  # fmt: skip
    for key, value in items:
        if key in ENDPOINTS and isinstance(value, str) and value:
            found.setdefault(str(key), value)
        for name, url in saved_endpoints(value, depth + 1).items():
            found.setdefault(name, url)
    return found


def merged(current: T, baseline: T, saved: Mapping[str, Any], given: Callable[[str], bool]) -> T:
    """`current` (the settings this invocation made) with each field it did not
    change taken from `saved` (`load_fields`). A field is changed when a flag of its
    name was given, or when it differs from `baseline` (the settings the same
    command makes with every flag at its default). Nested settings are merged field
    by field; an endpoint is always this invocation's, at any depth."""
    changes: dict[str, Any] = {}
    endpoints = {name: getattr(current, name) for name in ENDPOINTS if hasattr(current, name)}
    for name, value in saved.items():
        mine, default = getattr(current, name), getattr(baseline, name)
        if name in ENDPOINTS or given(name):
            continue
        if is_dataclass(mine) and type(value) is type(mine):
            inner = {f.name: getattr(value, f.name) for f in saved_fields(type(value))}
            value = merged(mine, default, inner, given)
        elif mine != default:
            continue
        changes[name] = _with_endpoints(value, endpoints)
    return replace(current, **changes) if changes else current  # type: ignore[type-var]


def _with_endpoints(value: Any, endpoints: Mapping[str, Any]) -> Any:
    """`value` with every endpoint field inside it set to this invocation's."""
    if isinstance(value, list):
        return [_with_endpoints(item, endpoints) for item in value]
    if is_dataclass(value) and not isinstance(value, type):
        own = {f.name for f in fields(value)}
        changes = {n: u for n, u in endpoints.items() if n in own}
        for f in fields(value):
            inner = getattr(value, f.name)
            if isinstance(inner, list) or (is_dataclass(inner) and not isinstance(inner, type)):
                changes[f.name] = _with_endpoints(inner, endpoints)
        return replace(value, **changes) if changes else value
    return value
