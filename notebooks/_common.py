"""What every notebook shares: the SMALL switch, the output folder, showing and saving.

Imported as ``from _common import OUT, SMALL, save, show`` (the notebooks run from this
folder, as scripts or under Jupyter).
"""

import json
import os
from pathlib import Path

# SMALL: tiny sizes for CI (CONVEXFL_SMALL=1); CONVEXFL_OUT: where the PNGs and JSON go
SMALL = os.environ.get("CONVEXFL_SMALL") == "1"
_here = Path(__file__).resolve().parent
if _here.name != "notebooks" and (_here / "notebooks").is_dir():
    _here = _here / "notebooks"
OUT = Path(os.environ.get("CONVEXFL_OUT") or _here / "out")
OUT.mkdir(parents=True, exist_ok=True)


def show(paths):
    """Display the PNGs inline under Jupyter; print their paths when run as a script."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
        inline = get_ipython() is not None
    except ImportError:
        inline = False
    for p in paths:
        if inline:
            display(Image(filename=str(p)))
        else:
            print("wrote", p)


def save(name, summaries):
    """Write the notebook's numbers (JSON, no NaN) next to its figures."""
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"small": SMALL, **summaries}, indent=2, allow_nan=False))
    print("wrote", path)
