"""Fixtures of the tool-call tests (pytester is enabled by the top-level conftest)."""
