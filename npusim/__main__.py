"""``python -m npusim`` runs the command line."""

from npusim.cli import main

main()
