"""The ServerApp: one line around the algorithm (settings come from the run config)."""

from convexfl.federated import flower

from .task import algorithm

app = flower.server_app(algorithm())
