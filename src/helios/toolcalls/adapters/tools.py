"""Tool declarations in whatever shape the user has, rendered per API.

Accepted: Chat Completions tools (`{"type": "function", "function": {...}}`),
flat declarations (`{"name", "description", "parameters"}`, as Realtime and
Gemini use), Gemini tool objects (`{"functionDeclarations": [...]}`) and
Helios `ToolSpec`s.
"""

from __future__ import annotations

from typing import Any

from helios.models.tools import ToolSpec


def to_specs(tools: list[Any] | None) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for i, tool in enumerate(tools or []):
        if isinstance(tool, ToolSpec):
            specs.append(tool)
            continue
        if not isinstance(tool, dict):
            raise TypeError(f"tools[{i}]: expected a dict or ToolSpec, not {type(tool).__name__}")
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
        if declarations is not None:
            specs.extend(_flat(d, f"tools[{i}]") for d in declarations)
        elif isinstance(tool.get("function"), dict):
            specs.append(_flat(tool["function"], f"tools[{i}]"))
        else:
            specs.append(_flat(tool, f"tools[{i}]"))
    return specs


def _flat(declaration: dict[str, Any], where: str) -> ToolSpec:
    name = declaration.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: a tool needs a name")
    parameters = declaration.get("parameters") or declaration.get("input_schema")
    return ToolSpec(
        name=name,
        description=str(declaration.get("description", "")),
        parameters=parameters or {"type": "object", "properties": {}},
    )


def chat_tools(tools: list[Any] | None) -> list[dict[str, Any]]:
    return [spec.to_openai() for spec in to_specs(tools)]


def realtime_tools(tools: list[Any] | None) -> list[dict[str, Any]]:
    return [{"type": "function", **spec.to_hermes()} for spec in to_specs(tools)]


def gemini_tools(tools: list[Any] | None) -> list[dict[str, Any]]:
    specs = to_specs(tools)
    return [{"functionDeclarations": [spec.to_hermes() for spec in specs]}] if specs else []
