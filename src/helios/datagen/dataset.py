"""The prompt dataset: a JSONL file, one `{"prompt": ..., "image"?, "docker_image"?, "cwd"?}`
per line.

A bad line (invalid JSON, nesting too deep or a number too long to read, not an
object, no `prompt`, a prompt that is not a string or is empty, an `image`/`cwd`
that is not a string) is skipped with one warning naming the file, line and field,
and counted. A missing file, or one without a single valid prompt, is bad input
(exit 2).

Each row gets Hermes's `prompt_index` (its position among the valid rows) and a
content key: a hash of the prompt, its image and cwd, and which occurrence of that
content it is. The key is what resume matches on: it survives reordering and
insertions, and tells duplicate prompts apart.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helios.errors import InputError
from helios.safe_json import JsonValueError, parse_json

#: bad lines warned about one by one (all are counted)
MAX_BAD_LINE_WARNINGS = 20


@dataclass(frozen=True, slots=True)
class PromptRow:
    #: Hermes's prompt_index: the position among the valid rows (after max_samples)
    index: int
    #: 1-based line in the dataset file
    line: int
    prompt: str
    image: str | None
    cwd: str | None
    #: which occurrence of this same content this row is (0 for the first)
    occurrence: int
    #: stable content identity (what resume matches on)
    key: str


@dataclass(frozen=True, slots=True)
class BadLine:
    line: int
    reason: str
    field: str | None = None

    def render(self, path: Path) -> str:
        where = f"{path}:{self.line}" + (f" [{self.field}]" if self.field else "")
        return f"{where}: {self.reason}; line skipped"


@dataclass
class Dataset:
    path: Path
    rows: list[PromptRow]
    bad: list[BadLine] = field(default_factory=list)
    #: valid rows dropped by max_samples
    truncated: int = 0

    def bad_line_warnings(self, limit: int = MAX_BAD_LINE_WARNINGS) -> list[str]:
        """One warning per bad line, the first `limit` of them, then how many more."""
        lines = [line.render(self.path) for line in self.bad[:limit]]
        if len(self.bad) > limit:
            lines.append(f"… and {len(self.bad) - limit} more bad lines (all counted "
                         "in statistics.json)")  # fmt: skip
        return lines


def content_hash(prompt: str, image: str | None, cwd: str | None) -> str:
    payload = json.dumps([prompt, image, cwd], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


def _optional_str(entry: dict[str, Any], *names: str) -> tuple[str | None, str | None]:
    """(value, None) or (None, the bad field's name)."""
    for name in names:
        value = entry.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            return None, name
        return value, None
    return None, None


def _parse(raw: bytes, number: int) -> tuple[str, str | None, str | None] | BadLine:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine(number, f"not valid UTF-8 ({exc.reason})")
    try:
        # NaN is let through: only the string fields below are used
        entry = parse_json(text, allow_nan=True)
    except JsonValueError as exc:
        return BadLine(number, str(exc))
    if not isinstance(entry, dict):
        return BadLine(number, f"expected a JSON object, got {type(entry).__name__}")
    if "prompt" not in entry:
        return BadLine(number, "no 'prompt' field", "prompt")
    prompt = entry["prompt"]
    if not isinstance(prompt, str):
        return BadLine(number, f"'prompt' must be a string, got {type(prompt).__name__}",
                       "prompt")  # fmt: skip
    if not prompt.strip():
        return BadLine(number, "'prompt' is empty", "prompt")
    image, bad = _optional_str(entry, "image", "docker_image")
    if bad is not None:
        return BadLine(number, f"'{bad}' must be a string", bad)
    cwd, bad = _optional_str(entry, "cwd")
    if bad is not None or (cwd is not None and not cwd.startswith("/")):
        return BadLine(number, "'cwd' must be an absolute path", "cwd")
    return prompt, image, cwd


def check_dataset_file(path: Path) -> None:
    """A missing dataset is an InputError (exit 2) before anything is read."""
    if not path.is_file():
        raise InputError("dataset file not found", file=str(path), field="--dataset_file")


def load_dataset(path: Path, max_samples: int | None = None) -> Dataset:
    """Read and check every line; raise InputError (exit 2) if nothing usable is left."""
    check_dataset_file(path)
    rows: list[PromptRow] = []
    bad: list[BadLine] = []
    seen: Counter[str] = Counter()
    valid = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            parsed = _parse(raw.rstrip(b"\r\n"), number)
            if isinstance(parsed, BadLine):
                bad.append(parsed)
                continue
            valid += 1
            if max_samples is not None and len(rows) >= max_samples:
                continue
            prompt, image, cwd = parsed
            digest = content_hash(prompt, image, cwd)
            occurrence = seen[digest]
            seen[digest] += 1
            key = hashlib.sha256(f"{digest}:{occurrence}".encode()).hexdigest()[:20]
            rows.append(PromptRow(len(rows), number, prompt, image, cwd, occurrence, key))
    if not rows:
        detail = f" ({len(bad)} bad line(s))" if bad else ""
        raise InputError(f"no valid prompt in the dataset{detail}", file=str(path),
                         field="--dataset_file")  # fmt: skip
    return Dataset(path, rows, bad, truncated=valid - len(rows))
