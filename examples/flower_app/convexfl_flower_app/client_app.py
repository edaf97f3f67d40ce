"""The ClientApp: one line around the algorithm and the data loader."""

from convexfl.federated import flower

from .task import algorithm, load_partition

app = flower.client_app(algorithm(), load_partition)
