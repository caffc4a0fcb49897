"""A value several units of a batch need, made once: the first unit that asks makes it
(in its own run, with its own slot and retries); the others that ask while it is made
wait for it, and get its value or its failure. The tool-call door shares a prompt's
audio between the prompt's runs this way.

Invariants:
- a key's value is made at most once while it is kept (`forget` drops it);
- a failure is shared like a value: every unit that asked for it fails with it;
- a maker that is cancelled (an interrupt) makes no value: the units waiting for it
  are cancelled too, and the next unit to ask makes it again;
- a waiter that is cancelled does not cancel the making.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedValues(Generic[K, V]):
    def __init__(self) -> None:
        self._values: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    async def get(self, key: K, make: Callable[[], Awaitable[V]]) -> V:
        """The value of `key`: made now by `make()` if no unit has asked for it yet."""
        known = self._values.get(key)
        if known is not None:
            return await asyncio.shield(known)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._values[key] = future
        try:
            value = await make()
        except asyncio.CancelledError:
            future.cancel()
            if self._values.get(key) is future:
                del self._values[key]
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when none waits
            raise
        future.set_result(value)
        return value

    def forget(self, key: K) -> None:
        """Drop the value of `key` (no unit needs it any more)."""
        self._values.pop(key, None)
