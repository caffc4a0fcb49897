"""JSON at Helios's edges: strict reading of untrusted text, and writing that never
produces `NaN` or `Infinity` (which are not JSON: most readers reject the file).

Reading (`parse_json`) turns every way a hostile text can break Python's parser
into one `JsonValueError` with a one-line reason: invalid JSON, `NaN`/`Infinity`
literals, a number too large for a float, an integer with more digits than Python
converts, nesting deeper than the interpreter's recursion allows. Callers catch
that one error (it is a `ValueError`) and report it as bad input.

Writing (`dumps`) is `json.dumps` with `allow_nan=False`. The values are kept
finite where they are made (rewards, means, costs); should a non-finite number
still reach a writer, it becomes `null` and a warning is logged, so the file stays
valid JSON and the run goes on.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


class JsonValueError(ValueError):
    """Untrusted text that is not (strict, finite) JSON; `str()` is one line.

    For a syntax error, `line` and `column` say where (`str()` names the line only
    past the first: a caller that reads a file line by line names it itself)."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        where = ""
        if column is not None:
            where = f" at column {column}"
            if line is not None and line > 1:
                where = f" at line {line} column {column}"
        super().__init__(reason + where)


def _no_constant(name: str) -> Any:
    raise JsonValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise JsonValueError(f"the number {text[:40]} is out of range")
    return number


def parse_json(text: str | bytes, *, allow_nan: bool = False) -> Any:
    """Strict JSON: raise `JsonValueError` (one line) for anything Helios should not
    take in. With `allow_nan`, non-finite numbers (`NaN`, `Infinity`, `1e400`) are
    kept, for input whose numbers Helios never uses."""
    try:
        if allow_nan:
            return json.loads(text)
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except JsonValueError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonValueError(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except UnicodeDecodeError as exc:
        raise JsonValueError(f"not valid UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise JsonValueError("nested too deeply") from None
    except ValueError as exc:  # an integer past sys.get_int_max_str_digits()
        raise JsonValueError(f"a number is too long ({str(exc).split(':')[0]})") from None


def sanitize(value: Any) -> Any:
    """`value` with every non-finite float replaced by None (containers copied)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: sanitize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(item) for item in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` that never writes NaN or Infinity (options as json.dumps's)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
    log.warning("a non-finite number was written as null")
    return json.dumps(sanitize(value), allow_nan=False, **options)
