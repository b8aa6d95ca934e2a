"""phaze-gym: co-search of a training accelerator's architecture and its device placement (PHAZE)."""

__version__ = "0.1.0"

from phaze_env.env import register_envs  # noqa: E402 - registers the Gymnasium ids (imports gymnasium only)

register_envs()
