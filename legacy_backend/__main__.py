"""`python -m legacy_backend`: same as the `legacy-backend` console script."""

from __future__ import annotations

import sys

from legacy_backend.cli import main

if __name__ == "__main__":
    sys.exit(main())
