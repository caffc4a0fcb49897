"""The `helios` command's entry point: the signal watch first, then everything else.

Importing the app takes a moment; a Ctrl-C or SIGTERM in that moment must end
the process with exit 130 and one line, not a traceback or 143. Nothing has
started yet, so there is nothing to clean up. From here on a thread of its own
sees every interrupt (`helios.engine.interrupts`).
"""

from __future__ import annotations


def main() -> None:
    from helios.engine.interrupts import SignalWatch

    SignalWatch.install()
    from helios.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
