"""`python -m helios` is the same as the `helios` command."""

from helios.cli.entry import main

main()
