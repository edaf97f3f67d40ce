"""``python -m convexfl.torch``: print the digits comparison table."""

from .compare import main

main()
