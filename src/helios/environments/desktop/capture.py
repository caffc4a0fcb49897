"""How the screen becomes a PNG: the sandbox command for each capture program an
image may have, in Harbor's order of preference (ImageMagick's `import`, else
`scrot`, else `xwd` with `convert`), cropped for a zoom at full resolution."""

from __future__ import annotations

from helios.environments.desktop.actions import Region

#: what `capture_command` gives when the image has none of the programs
NO_CAPTURE = "echo 'no screenshot tool (import, scrot or xwd) in the image' >&2; exit 127"


def capture_command(tool: str | None, crop: Region | None, *, convert: bool, scratch: str) -> str:
    """A command that writes the screen (`crop` of it, if given) as a PNG on its
    stdout, with `tool` ("import", "scrot", "xwd"); `scratch` is a file it may
    write (scrot writes files only); `convert`: the image has ImageMagick's."""
    geometry = ""
    if crop is not None:
        x0, y0, x1, y1 = crop
        geometry = f"{x1 - x0}x{y1 - y0}+{x0}+{y0}"
    cropping = f" -crop {geometry} +repage" if geometry else ""
    if tool == "import":
        return f"import -silent -window root{cropping} png:-"
    if tool == "scrot":
        if crop is None:
            return f"scrot -o {scratch} && cat {scratch}"
        if convert:
            return f"scrot -o {scratch} && convert {scratch}{cropping} png:-"
        x0, y0, x1, y1 = crop
        return f"scrot -o -a {x0},{y0},{x1 - x0},{y1 - y0} {scratch} && cat {scratch}"
    if tool == "xwd":
        return f"xwd -root -silent | convert xwd:-{cropping} png:-"
    return NO_CAPTURE
