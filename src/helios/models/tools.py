"""How a tool is described to a model: one `ToolSpec`, rendered per wire API.

A spec can be written by hand or derived from a pydantic model of the arguments,
so the schema the model sees and the validation Helios applies come from one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    #: JSON Schema of the arguments (type: object)
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

    def to_hermes(self) -> dict[str, Any]:
        """The shape Hermes lists inside `<tools>`: name, description, parameters."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_model(cls, name: str, description: str, model: type[BaseModel]) -> ToolSpec:
        """A spec whose parameters are `model`'s JSON Schema, without pydantic's titles."""
        return cls(name, description, clean_schema(model.model_json_schema()))


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's `title` keys (models do not need them) at every level."""

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: walk(value, in_properties=(key == "properties"))
                for key, value in node.items()
                # under "properties" a key named "title" is an argument, not a title
                if in_properties or key != "title"
            }
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    cleaned: dict[str, Any] = walk(schema)
    return cleaned
