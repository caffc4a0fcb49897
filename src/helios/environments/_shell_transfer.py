"""Uploads and downloads through a local sandbox's persistent shell: a tar archive
on the command's stdin or stdout, instead of a one-shot bwrap with a transfer
folder bound in.

The archive is packed or unpacked *inside* the sandbox by the host's `tar`
(read-only there), so paths resolve in the sandbox's own view, as the one-shot
`cp` does. What comes out is checked on the host by `extract_tar`: no link
followed or recreated, nothing outside the destination, bounded in size and
entries. Larger uploads, or a sandbox without a shell, take the one-shot path.
"""

from __future__ import annotations

import posixpath
import shlex

from helios.environments._bwrap import tool
from helios.environments._payload import place_payload

#: uploads up to this size go through the shell (they are held in memory once)
SHELL_UPLOAD_MAX = 64 * 1024 * 1024
#: exit code of a download whose source does not exist
MISSING = 3


def usable() -> bool:
    return tool("tar") is not None


def upload_script(dst: str, is_dir: bool) -> str:
    """Unpack the archive (its one member `payload`) and copy it to `dst` as the
    one-shot path does: a folder's contents into `dst`, a file as `dst`."""
    copy = place_payload('"$t"', dst, is_dir=is_dir)
    return (
        't=$(mktemp -d /tmp/.helios-upload-XXXXXXXX) || exit 1\n'
        f'tar -x -f - --no-same-owner -C "$t" && {copy}\n'
        'code=$?; rm -rf -- "$t"; exit $code'
    )


def prepared_upload_script(prepare: str, dst: str) -> str:
    """`prepare`, then the archive unpacked straight into `dst`, which `prepare` left
    an empty folder nothing else can reach: no staging folder and no copy (five
    processes fewer than `upload_script`). The result is `prepare`'s when it fails."""
    return (
        f"{prepare}\n"
        "code=$?; [ $code = 0 ] || exit $code\n"
        f"exec tar -x -f - --no-same-owner --strip-components=1 -C {shlex.quote(dst)}"
    )


def download_script(src: str) -> str | None:
    """Archive `src` (a link as a link) on stdout; None for a path it cannot name."""
    parent, name = posixpath.split(posixpath.normpath(src))
    if not name or name in (".", ".."):
        return None
    quoted = shlex.quote(name)
    return (
        f"cd -- {shlex.quote(parent or '/')} || exit {MISSING}\n"
        f"[ -e {quoted} ] || [ -L {quoted} ] || exit {MISSING}\n"
        f"exec tar -c -f - -- {quoted}"
    )
