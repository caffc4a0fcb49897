"""Figures for a person, one definition each, shared by the terminal, the summaries
and the viewer (whose JavaScript mirrors these rules: `view/static/app.js`).

- A percentage rounds half to even on the float's exact value, as Python's format
  does: 0.5625 is "56.2%" (JavaScript's `toFixed` would say 56.3).
- "out tok/s" is output tokens per second of wall time.
"""

from __future__ import annotations


def percent(value: float, digits: int = 1) -> str:
    """`value` (a fraction, 0.5625) as a percentage ("56.2%"), rounded half to even."""
    return f"{value * 100:.{digits}f}%"


def points(value: float, digits: int = 1) -> str:
    """A difference of two rates (fractions), in signed percentage points: "+6.2 pp"."""
    return f"{value * 100:+.{digits}f} pp"


def out_tokens_per_second(output_tokens: int, seconds: float) -> float:
    """Output tokens per second of wall time (0 before any time has passed)."""
    return output_tokens / seconds if seconds > 0 else 0.0
