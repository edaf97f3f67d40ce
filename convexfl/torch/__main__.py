"""``python -m convexfl.torch``: print the digits comparison table."""

import sys

from .compare import main

sys.exit(main())
