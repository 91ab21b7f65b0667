"""``python -m autotune.cli ...`` runs the ``autotune`` command line."""
from . import main

main()
