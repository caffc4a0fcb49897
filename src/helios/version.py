"""Helios's version, for the records a run writes and `helios --version`."""

__version__ = "0.1.0"
