"""phaze-gym: co-search of a training accelerator's architecture and its device placement (PHAZE).

The evaluator never imports Gymnasium. The Gymnasium ids (``phaze_env/ArchSearch-v0``, …) are registered
by :mod:`phaze_env.env`: ``import phaze_env.env``, or name it in the id,
``gymnasium.make("phaze_env.env:phaze_env/ArchSearch-v0")``. ``import gymnasium, phaze_env`` registers them
too — when Gymnasium is already loaded, importing this package imports :mod:`phaze_env.env`.

Modules import only from their own floor or lower ones; ``tests/test_layering.py`` lists the floors.
"""

import sys

__version__ = "0.1.0"

if "gymnasium" in sys.modules:
    import phaze_env.env  # noqa: E402,F401 - registers the Gymnasium ids (imports gymnasium only)
