"""The images a task's Dockerfile starts FROM, and what to say when one is missing.

A GUI task starts FROM Helios's desktop image (`helios-desktop:bookworm`), which no
registry serves: it is built on the machine from `examples/gui/desktop-base`. Its
absence must not read as a registry's DNS error: it is named with the command that
builds it, before any build is tried. Any other base image that is not on the
machine and whose build failed is named too (a pull that failed)."""

from __future__ import annotations

import shlex
from pathlib import Path

#: the repository of Helios's desktop image; any tag of it is built, never pulled
DESKTOP_REPO = "helios-desktop"
DESKTOP_IMAGE = f"{DESKTOP_REPO}:bookworm"
#: where a Helios checkout keeps the desktop image's build context
_CHECKOUT_CONTEXT = Path(__file__).resolve().parents[4] / "examples" / "gui" / "desktop-base"


def base_images(dockerfile: str) -> list[str]:
    """The images named by the Dockerfile's FROM lines, in order, less `scratch`,
    earlier stages and names built from ARGs (which only a build can tell)."""
    images: list[str] = []
    stages: set[str] = set()
    for raw in dockerfile.splitlines():
        words = raw.split()
        if len(words) < 2 or words[0].upper() != "FROM":
            continue
        rest = [w for w in words[1:] if not w.startswith("--")]
        if not rest:
            continue
        image = rest[0]
        if len(rest) >= 3 and rest[1].upper() == "AS":
            stages.add(rest[2].lower())
        if image.lower() == "scratch" or image.lower() in stages or "$" in image:
            continue
        if image not in images:
            images.append(image)
    return images


def is_desktop_image(image: str) -> bool:
    name = image.split("@", 1)[0]
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        name = name[:colon]  # the tag
    return name == DESKTOP_REPO or name.endswith(f"/{DESKTOP_REPO}")


def build_command(image: str) -> str:
    """The command that builds Helios's desktop image `image` on this machine."""
    context = _CHECKOUT_CONTEXT if _CHECKOUT_CONTEXT.is_dir() else Path("examples/gui/desktop-base")
    return (f"DOCKER_BUILDKIT=0 docker build --network host -t {shlex.quote(image)} "
            f"{shlex.quote(str(context))}")  # fmt: skip


def missing_desktop_image(image: str) -> str:
    """One line: the desktop image is missing, and the command that builds it."""
    return (f"the desktop image {image} is not on this machine (no registry serves it): "
            f"build it with `{build_command(image)}` (a Helios checkout's "
            "scripts/setup-system.sh does it)")  # fmt: skip


def missing_base_images(images: list[str], said: str) -> str:
    """One line for a failed build whose base images are not on this machine."""
    named = ", ".join(images)
    return (f"the base image {named} is not on this machine and could not be pulled "
            f"(pull it, or build it, first): {said}")  # fmt: skip
