"""gelujax: GELU-family activations, Flax models and a training engine for the GELU paper.

The activations are imported eagerly (``gelujax.gelu``); the other submodules (``engine``,
``study``, ``data``, ...) load on first use, so ``import gelujax`` stays cheap for model code.
"""

import importlib

from gelujax.activations import (
  ACTIVATIONS,
  clipped_gelu,
  elu,
  gated,
  gaussian_gelu,
  geglu,
  gelu,
  gelu_fast,
  gelu_sigmoid,
  gelu_tanh,
  reglu,
  relu,
  silu,
  soi_map,
  swiglu,
)
from gelujax.linen import (
  Activation,
  Encoder,
  FeedForward,
  GatedMLP,
  LearnableGELU,
  TransformerBlock,
  gated_hidden_features,
)
from gelujax.registry import Registry
from gelujax.specs import (
  activation_aliases,
  activation_names,
  gated_unit_names,
  get_activation,
  register_activation,
)

__all__ = [
  "ACTIVATIONS",
  "Activation",
  "Encoder",
  "FeedForward",
  "GatedMLP",
  "LearnableGELU",
  "Registry",
  "TransformerBlock",
  "activation_aliases",
  "activation_names",
  "clipped_gelu",
  "elu",
  "gated",
  "gated_hidden_features",
  "gated_unit_names",
  "gaussian_gelu",
  "geglu",
  "gelu",
  "gelu_fast",
  "gelu_sigmoid",
  "gelu_tanh",
  "get_activation",
  "register_activation",
  "reglu",
  "relu",
  "silu",
  "soi_map",
  "swiglu",
]
__version__ = "0.1.0"

_SUBMODULES = frozenset(
  {
    "checkpoints", "data", "download", "engine", "host", "members", "models", "nnx",
    "objectives", "optimizers", "paper", "prng", "registry", "study", "tasks", "workdir",
    "writers",
  }
)  # fmt: skip


def __getattr__(name: str):
  if name in _SUBMODULES:
    return importlib.import_module(f"gelujax.{name}")
  raise AttributeError(f"module 'gelujax' has no attribute {name!r}")
