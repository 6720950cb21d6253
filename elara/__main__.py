"""`python -m elara` runs the command line."""

import sys

from elara.cli import main

sys.exit(main())
