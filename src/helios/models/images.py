"""Images in a conversation as the wires send them: base64, data URLs, and the window
of the last K screenshots that go back to the model.

A GUI episode adds a screenshot every turn; sending all of them makes each request
grow without bound (tokens, bytes, and the provider's image limits). Only the last
`GenerationConfig.keep_images` images go out; each older one becomes a placeholder.

The window is found from the end of the conversation, so a turn walks only the
messages that hold the last K images. A client caches each message's wire form
under its own key; a message that has left the window gets a second cached form
(`wire_key(WIRE, kept)`), so an image leaving the window costs one conversion of
that one message, once.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass

from helios.models.base import ImageRef, Message

#: the text that stands for an image no longer sent
OMITTED = "[screenshot omitted]"


def b64(image: ImageRef) -> str:
    return base64.b64encode(image.data).decode("ascii")


def data_url(image: ImageRef) -> str:
    return f"data:{image.media_type};base64,{b64(image)}"


@dataclass(frozen=True, slots=True)
class ImageWindow:
    """Which images of a conversation are sent: messages before `cutoff` send none,
    `messages[cutoff]` sends its last `partial`, later messages send all of theirs."""

    cutoff: int = 0
    partial: int | None = None

    def kept(self, index: int, message: Message) -> int:
        """How many of this message's images (its last ones) are sent."""
        if index > self.cutoff or (index == self.cutoff and self.partial is None):
            return len(message.images)
        if index == self.cutoff:
            return self.partial or 0
        return 0


ALL = ImageWindow()


def image_window(messages: list[Message], limit: int | None) -> ImageWindow:
    """The window that sends the last `limit` images (None: every image)."""
    if limit is None:
        return ALL
    remaining = max(limit, 0)
    for index in range(len(messages) - 1, -1, -1):
        count = len(messages[index].images)
        if count == 0:
            continue
        if count > remaining:
            return ImageWindow(index, remaining)
        remaining -= count
    return ALL


def wire_key(wire: str, kept: int, message: Message) -> str:
    """The cache key of a message's wire form when `kept` of its images are sent."""
    return wire if kept >= len(message.images) else f"{wire}:{kept}"


def split_kept(message: Message, kept: int) -> tuple[int, list[ImageRef]]:
    """(number of images omitted, the images sent) for a message sending `kept`."""
    images = message.images
    kept = min(kept, len(images))
    return len(images) - kept, images[len(images) - kept :]


def _placeholder_png() -> bytes:
    """A 1×1 grey PNG: what stands for a screenshot where the wire requires an
    image (an OpenAI computer_call_output has no text form)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x80")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


PLACEHOLDER_PNG = ImageRef.of(_placeholder_png())
