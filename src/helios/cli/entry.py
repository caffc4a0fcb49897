"""The `helios` command's entry point: signal handlers first, then everything else.

Importing the app takes a moment; a Ctrl-C or SIGTERM in that moment must end
the process with exit 130 and one line, not a traceback or 143. Nothing has
started yet, so there is nothing to clean up.
"""

from __future__ import annotations

import os
import signal
from types import FrameType


def early_exit(signum: int, frame: FrameType | None) -> None:
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    os.write(2, f"interrupted ({name}) before anything started\n".encode())
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, early_exit)
    signal.signal(signal.SIGTERM, early_exit)
    from helios.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
