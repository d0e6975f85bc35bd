"""``python -m gateway`` runs the console script."""

import sys

from gateway.cli import main

sys.exit(main())
