"""The parent's and its workers' messages: length-prefixed pickles over a socket pair.

See `workers.py` for what each message means. A socket that closes or breaks is the
end of the messages (`receive` gives None), never an error of its own.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any


def frame(message: tuple[Any, ...]) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(4, "big") + data


async def send(writer: asyncio.StreamWriter, message: tuple[Any, ...]) -> None:
    writer.write(frame(message))
    await writer.drain()


async def receive(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    try:
        header = await reader.readexactly(4)
        return pickle.loads(await reader.readexactly(int.from_bytes(header, "big")))  # type: ignore[no-any-return]
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
