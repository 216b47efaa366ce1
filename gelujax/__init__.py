"""gelujax: GELU-family activations, Flax models and a training engine for the GELU paper."""

from gelujax.activations import (
  ACTIVATIONS,
  Activation,
  LearnableGELU,
  activation_names,
  elu,
  gaussian_gelu,
  gelu,
  gelu_sigmoid,
  gelu_tanh,
  get_activation,
  relu,
  silu,
  soi_map,
)
from gelujax.registry import Registry

__all__ = [
  "ACTIVATIONS",
  "Activation",
  "LearnableGELU",
  "Registry",
  "activation_names",
  "elu",
  "gaussian_gelu",
  "gelu",
  "gelu_sigmoid",
  "gelu_tanh",
  "get_activation",
  "relu",
  "silu",
  "soi_map",
]
__version__ = "0.1.0"
