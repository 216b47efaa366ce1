"""gelujax: GELU-family activations, Flax models and a training engine for the GELU paper."""

from gelujax.registry import Registry

__all__ = ["Registry"]
__version__ = "0.1.0"
