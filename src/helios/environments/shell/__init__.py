"""What both sandbox providers share: the persistent shell's wire protocol and its
servers, and the checked way files go in and out.

- `server.c` (+ `container_user.h`): the shell server, compiled once per machine
  (`native`); statically linked, it is a docker container's init.
- `server.py`: its Python twin, same wire format, for a host without a C compiler
  (local only); `tests/test_local_shell.py` runs every case against both.
- `client`: the host side of the protocol; `procs`: the server's processes seen
  from the host.
- `transfer`, `tar`, `payload`, `safe_copy`: uploads and downloads through the
  shell and the host-side checks on what comes out; `owner`: who owns a sandbox
  (for `helios cleanup`).
"""
