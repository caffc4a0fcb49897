"""API keys are registered here so any text can be scrubbed before it is stored.

Keys are kept out of outputs by construction (they live only in SDK clients);
redaction is the second line of defence for provider error messages that
echo a key back.

A URL may carry a key too, in its userinfo (`http://user:sk-…@host/v1`): URLs
are shown only as `public_url` gives them, and `register_url` makes the userinfo
a secret like a key.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

_SECRETS: set[str] = set()
#: longest first, so a secret that holds another (`user:key` and `key`) goes whole
_ORDERED: tuple[str, ...] = ()
MIN_LENGTH = 6

#: a URL's scheme (optional) and its userinfo: everything up to the authority's
#: last "@" (as urllib and aiohttp split it)
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)?[^/?#\s]*@")


def register_secret(value: str | None) -> None:
    global _ORDERED
    if value and len(value) >= MIN_LENGTH and value not in _SECRETS:
        _SECRETS.add(value)
        _ORDERED = tuple(sorted(_SECRETS, key=len, reverse=True))


def registered() -> tuple[str, ...]:
    """Every secret registered in this process (a worker process of `--workers` is
    handed them: it redacts what it writes as this one does)."""
    return _ORDERED


def public_url(url: str) -> str:
    """`url` without its userinfo: what may be shown or stored of an endpoint."""
    return _USERINFO.sub(lambda m: m.group("scheme") or "", url, count=1)


def register_url(url: str | None) -> None:
    """Register the userinfo of `url` (`user:password`, and the password alone), as
    written and percent-decoded, as secrets."""
    if not url:
        return
    match = _USERINFO.match(url)
    if match is None:
        return
    userinfo = match.group()[len(match.group("scheme") or "") : -1]
    _, colon, password = userinfo.partition(":")
    for value in (userinfo, password if colon else ""):
        register_secret(value)
        register_secret(unquote(value))


def redact(text: str) -> str:
    for secret in _ORDERED:
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
