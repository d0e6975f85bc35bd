"""``python -m gateway`` runs the console script."""

import sys

from gateway.cli.main import main

sys.exit(main())
