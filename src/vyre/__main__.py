"""``python -m vyre``: the `vyre` command."""

from vyre.cli.app import main

main()
