"""What every Hermes-compatible tool shares: pydantic arguments, JSON results.

Hermes tools answer with a JSON object, and a failed call is `{"error": "..."}`
(that is how Hermes's statistics tell failures apart), so these tools catch their
own input errors and return them that way instead of raising. The arguments are
a pydantic model: one source for the schema the model sees and the validation
Helios applies. Unknown arguments are ignored, as Hermes does.
"""

from __future__ import annotations

import json
import posixpath
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from helios.agents.tools_text import ToolInputError, check_shell_text, truncate_middle
from helios.agents.toolsets.base import Tool, ToolContext, ToolOutcome
from helios.models.tools import ToolSpec, clean_schema

A = TypeVar("A", bound=BaseModel)

#: where `~` points inside the sandboxes (HOME is /root in both providers)
SANDBOX_HOME = "/root"


class HermesArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")


def hermes_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema in Hermes's plain style: an optional field is its own
    type (no anyOf with null), with no null defaults and no titles."""
    schema = clean_schema(model.model_json_schema())
    for prop in schema.get("properties", {}).values():
        variants = prop.pop("anyOf", None)
        if variants is not None:
            kept = [v for v in variants if v.get("type") != "null"]
            if len(kept) == 1:
                prop.update(kept[0])
        if "const" in prop:
            prop["enum"] = [prop.pop("const")]
        if "default" in prop and prop["default"] is None:
            del prop["default"]
    return schema


def tool_spec(name: str, description: str, model: type[BaseModel]) -> ToolSpec:
    return ToolSpec(name, description, hermes_schema(model))


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    if error["type"] == "missing":
        return f"missing required argument '{where}'"
    return f"argument '{where}': {error['msg']}"


def fit_json(result: dict[str, Any], limit: int, field: str) -> str:
    """JSON of `result` within `limit` characters, cutting the middle of `field`."""
    text = json.dumps(result, ensure_ascii=False)
    value = result.get(field)
    if len(text) <= limit or not isinstance(value, str):
        return text
    overflow = len(text) - limit
    # JSON escapes make the encoded field longer than the string: cut with margin.
    room = max(len(value) - overflow * 2 - 64, 0)
    return json.dumps({**result, field: truncate_middle(value, room)}, ensure_ascii=False)


def sandbox_path(raw: str, workdir: str) -> str:
    """An absolute, normalised path: relative ones start at the working directory."""
    check_shell_text("path", raw)
    if not raw.strip():
        raise ToolInputError("the path is empty")
    if "\n" in raw:
        raise ToolInputError("the path contains a line break")
    path = raw.strip()
    if path == "~" or path.startswith("~/"):
        path = SANDBOX_HOME + path[1:]
    if not path.startswith("/"):
        path = posixpath.join(workdir, path)
    return "/" + posixpath.normpath(path).lstrip("/")


class HermesTool(Tool, Generic[A]):
    """A tool with pydantic arguments whose result is a JSON object."""

    Args: ClassVar[type[BaseModel]]
    #: the result field cut first when the JSON is too long
    bulky_field: ClassVar[str] = "output"

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        try:
            args = self.Args.model_validate(dict(arguments))
        except ValidationError as exc:
            return self._error(f"{self.name}: {_first_error(exc)}", ctx)
        try:
            result = await self.call(args, ctx)  # type: ignore[arg-type]
        except ToolInputError as exc:
            return self._error(str(exc), ctx)
        failed = result.get("error") is not None or result.get("success") is False
        text = fit_json(result, ctx.max_output_chars, self.bulky_field)
        return ToolOutcome(text, is_error=failed)

    def _error(self, message: str, ctx: ToolContext) -> ToolOutcome:
        text = fit_json({"error": message}, ctx.max_output_chars, "error")
        return ToolOutcome(text, is_error=True)

    @abstractmethod
    async def call(self, args: A, ctx: ToolContext) -> dict[str, Any]:
        """The result object; raise ToolInputError for a call that cannot be done."""
