"""A Flower app that runs a convexfl algorithm (see docs/flower.md)."""
