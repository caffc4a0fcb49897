"""API keys are registered here so any text can be scrubbed before it is stored.

Keys are kept out of outputs by construction (they live only in SDK clients);
redaction is the second line of defence for provider error messages that
echo a key back.
"""

from __future__ import annotations

from typing import Any

_SECRETS: set[str] = set()
MIN_LENGTH = 6


def register_secret(value: str | None) -> None:
    if value and len(value) >= MIN_LENGTH:
        _SECRETS.add(value)


def redact(text: str) -> str:
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def redact_value(value: Any) -> Any:
    """`redact` applied to every string inside a JSON-like value (dicts, lists)."""
    if not _SECRETS:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    return value
