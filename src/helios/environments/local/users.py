"""Users in a local (bwrap) sandbox, as far as one user namespace allows.

A docker task names a user its Dockerfile created (`useradd agent`); the local
provider does not run the Dockerfile, so such a user is added to the sandbox's
own copy of /etc/passwd and /etc/group (bound over the host's read-only /etc)
with a free uid from 1000 up and a home under /home. A name the host knows
keeps its uid; a bare uid is taken as given.

What bwrap cannot give: each exec maps exactly one uid inside to the one host
user that owns the trial's root. So `whoami`, `id`, `$HOME` and the owner that
files appear to have are the user's, but the kernel cannot keep users apart
inside one sandbox: a command run as `agent` may change files root made there,
and `chown` to any other uid fails. The boundary that matters (sandbox versus
host) is unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from helios.environments.base import User
from helios.errors import EnvironmentExecError

FIRST_UID = 1000
PASSWD_FILE = "etc-passwd"
GROUP_FILE = "etc-group"


@dataclass(frozen=True, slots=True)
class SandboxUser:
    name: str
    uid: int
    gid: int
    home: str


def _entries(path: Path) -> list[list[str]]:
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line.split(":") for line in lines if line and not line.startswith("#")]


@dataclass
class LocalUsers:
    """The users one sandbox has needed so far, and its identity files."""

    holder: Path
    etc: Path = Path("/etc")
    added: dict[str, SandboxUser] = field(default_factory=dict)

    def resolve(self, user: User) -> SandboxUser:
        passwd = _entries(self.etc / "passwd")
        if isinstance(user, int):
            for entry in passwd:
                if len(entry) >= 6 and entry[2] == str(user):
                    return SandboxUser(entry[0], user, int(entry[3]), entry[5] or "/")
            return SandboxUser(str(user), user, user, "/")
        if user in self.added:
            return self.added[user]
        for entry in passwd:
            if len(entry) >= 6 and entry[0] == user:
                return SandboxUser(user, int(entry[2]), int(entry[3]), entry[5] or "/")
        return self._add(user, passwd)

    def _add(self, name: str, passwd: list[list[str]]) -> SandboxUser:
        taken = {int(e[2]) for e in passwd if len(e) > 2 and e[2].isdigit()}
        taken |= {u.uid for u in self.added.values()}
        uid = FIRST_UID
        while uid in taken:
            uid += 1
        added = SandboxUser(name, uid, uid, f"/home/{name}")
        self.added[name] = added
        try:
            self._write_files()
        except OSError as exc:
            raise EnvironmentExecError(f"cannot add user {name!r} to the sandbox: {exc}") from None
        return added

    def _write_files(self) -> None:
        passwd = (self.etc / "passwd").read_text("utf-8", errors="replace").rstrip("\n")
        group = (self.etc / "group").read_text("utf-8", errors="replace").rstrip("\n")
        for user in self.added.values():
            passwd += f"\n{user.name}:x:{user.uid}:{user.gid}::{user.home}:/bin/sh"
            group += f"\n{user.name}:x:{user.gid}:"
        for name, text in ((PASSWD_FILE, passwd), (GROUP_FILE, group)):
            target = self.holder / name
            temporary = target.with_suffix(".tmp")
            temporary.write_text(text + "\n", "utf-8")
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)

    def binds(self) -> list[tuple[str, str]]:
        """(host file, sandbox path) read-only binds once a user had to be added."""
        if not self.added:
            return []
        return [
            (str(self.holder / PASSWD_FILE), "/etc/passwd"),
            (str(self.holder / GROUP_FILE), "/etc/group"),
        ]
