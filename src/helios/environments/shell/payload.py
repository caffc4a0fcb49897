"""The command that puts an uploaded payload in place inside a sandbox.

Every upload path stages the files as `<staging>/payload` first (a transfer
folder, an unpacked archive, a root-owned staging folder) and then copies them
with `cp` from inside the sandbox, so links the agent made resolve in its own
view: a folder's contents go into `dst`, a file becomes `dst`.
"""

from __future__ import annotations

import posixpath
import shlex


def place_payload(staging: str, dst: str, *, is_dir: bool, keep_owner: bool = True) -> str:
    """`staging` is a shell word (it may be `"$t"`). `keep_owner`: `cp -a` (run as
    root); otherwise `cp -p`, and the user running the copy owns the files."""
    target = shlex.quote(dst)
    if is_dir:
        flags = "-a" if keep_owner else "-R -p"
        return f"mkdir -p -- {target} && cp {flags} -- {staging}/payload/. {target}/"
    flags = "-a" if keep_owner else "-p"
    parent = shlex.quote(posixpath.dirname(dst) or "/")
    return f"mkdir -p -- {parent} && cp {flags} -- {staging}/payload {target}"
