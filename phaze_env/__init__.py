"""phaze-gym: co-search of a training accelerator's architecture and its device placement (PHAZE)."""

__version__ = "0.1.0"
