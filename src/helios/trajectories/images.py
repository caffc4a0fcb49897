"""A trajectory's image files: each image once, under `images/` beside
`trajectory.json`, named by its content hash (`images/<sha256>.png`), so a screen
that did not change between two screenshots is one file. A file is written to a
temporary name and renamed, so a name that exists holds the whole image; one that
exists already is not written again. No image ever goes into a JSON file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from helios.atomic_write import write_bytes_atomic
from helios.models.base import ImageRef

IMAGES_DIR = "images"
#: the screen as the agent left it, under `agent/images/`: the computer agent's own,
#: or the one Helios takes after any other agent on a task with a desktop
FINAL_SCREEN = "final.png"
#: the media types ATIF v1.6 allows for images, and their file extensions
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def digest(image: ImageRef) -> str:
    return image.sha256 or hashlib.sha256(image.data).hexdigest()


def image_path(image: ImageRef) -> str | None:
    """The image's path relative to the trajectory's folder; None for a media type
    ATIF has no place for."""
    extension = EXTENSIONS.get(image.media_type)
    if extension is None:
        return None
    return f"{IMAGES_DIR}/{digest(image)}.{extension}"


def write_images(folder: Path, images: Iterable[ImageRef]) -> int:
    """Write each distinct image under `folder/images/` unless it is there; returns
    how many files were written."""
    written = 0
    seen: set[str] = set()
    for image in images:
        relative = image_path(image)
        if relative is None or relative in seen:
            continue
        seen.add(relative)
        target = folder / relative
        if target.is_file():
            continue
        write_bytes_atomic(target, image.data)
        written += 1
    return written
