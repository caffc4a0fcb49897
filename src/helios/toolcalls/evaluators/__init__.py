"""Evaluators: how actual tool calls are scored against the expected ones."""

from helios.toolcalls.evaluators.exact import ExactEvaluator

__all__ = ["ExactEvaluator"]
