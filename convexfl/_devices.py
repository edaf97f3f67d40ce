"""Torch devices by name, for every torch back-end (the deep-model trainers of
:mod:`convexfl.torch` and ``method="torch"`` of :func:`convexfl.solvers.solve`).

This module imports PyTorch only inside :func:`resolve_device`, so that importing it (and
``convexfl``) never loads torch.
"""

from __future__ import annotations

__all__ = ["resolve_device"]


def resolve_device(device="cpu"):
    """The torch device named by ``device``.

    Parameters
    ----------
    device : {"cpu", "cuda", "cuda:<k>", "auto"} or torch.device
        ``"auto"`` is CUDA when available, else the CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    RuntimeError
        If a CUDA device is requested but CUDA is not available (or the index does not
        exist).
    ValueError
        For any other value.
    """
    import torch

    if isinstance(device, torch.device):
        name = str(device)
    elif isinstance(device, str):
        name = device.strip().lower()
    else:
        raise ValueError(f"device: expected 'cpu', 'cuda', 'cuda:<k>' or 'auto', got {device!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device={device!r}: CUDA is not available (torch.cuda.is_available() is "
                f"False; torch {torch.__version__}, CUDA build: {torch.version.cuda}); "
                "use device='cpu', or device='auto' to fall back to the CPU"
            )
        try:
            dev = torch.device(name)
        except RuntimeError:
            raise ValueError(f"device: cannot parse {device!r} as a CUDA device") from None
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) visible"
            )
        return dev
    raise ValueError(f"device: expected 'cpu', 'cuda', 'cuda:<k>' or 'auto', got {device!r}")
