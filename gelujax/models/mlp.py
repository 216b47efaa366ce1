"""The paper's dense models: :class:`MLP` (plain or with gated hidden layers, whose widths
:func:`gated_features` sets) and the mirrored :class:`Autoencoder`, with the paper's dense
initialisation, :func:`unit_norm_init`."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from gelujax.activations import gated, gelu_tanh
from gelujax.linen import Activation


def unit_norm_init(key: jax.Array, shape: Sequence[int], dtype=jnp.float32) -> jax.Array:
  """N(0, 1) weights with each output unit's incoming weights scaled to unit L2 norm.

  The paper's dense initialisation (``tf.nn.l2_normalize(tf.random_normal([in, out]), 0)``):
  for a Flax ``[in, out]`` kernel every column has norm 1.
  """
  w = jax.random.normal(key, shape, dtype)
  return w / jnp.linalg.norm(w, axis=0, keepdims=True)


def dense_parameter_count(widths: Sequence[int], gated: bool = False) -> int:
  """The weights and biases of dense layers through ``widths`` (input, hidden..., output); a
  gated hidden layer of width ``g`` has ``2 g`` outputs (value and gate) and passes on ``g``."""
  total = 0
  for i, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
    outputs = 2 * fan_out if gated and i < len(widths) - 2 else fan_out
    total += fan_in * outputs + outputs
  return total


@functools.cache
def gated_features(features: tuple[int, ...], num_inputs: int, num_outputs: int) -> tuple[int, ...]:
  """The hidden widths of a gated :class:`MLP` with the dense parameters of the ungated one.

  Every width is scaled by one factor, ``round(w * g / max(features))`` for the integer ``g``
  whose parameter count (:func:`dense_parameter_count`) is nearest the ungated one's (the
  smaller ``g`` on a tie): equal to within the rounding of the widest layer's width.
  Shazeer's rule, 2/3 of each width, is this rule for one feed-forward block between two layers
  of the same width ``d`` (``3 d d_gated = 2 d d_ff``; ``gated_features((2048,), 512, 512)`` is
  ``(1365,)``); in a stack it does not, as every gated layer reads the previous one's output
  and the first one the whole input (``mlp_mnist``'s 128 become 85: 236,650 parameters against
  217,354).
  """
  ungated = dense_parameter_count((num_inputs, *features, num_outputs))
  widest = max(features)

  def scaled(g: int) -> tuple[int, ...]:
    return tuple(max(1, round(w * g / widest)) for w in features)

  def mismatch(g: int) -> int:
    return abs(dense_parameter_count((num_inputs, *scaled(g), num_outputs), True) - ungated)

  return scaled(min(range(1, widest + 1), key=mismatch))


class MLP(nn.Module):
  """The paper's dense stack: ``features`` x [dense, activation, dropout] then a linear output.

  Inputs are flattened (``[B, ...] -> [B, D]``). Every dense layer, the output one included,
  uses :func:`unit_norm_init` and zero biases. Dropout follows every hidden activation; it is
  never applied to the inputs or the logits.

  *(choice)* With ``gated=True``, not in the paper, every hidden layer is a gated linear unit
  (Shazeer 2020, :func:`gelujax.gated`): a dense layer of ``2 g`` outputs, the first ``g`` the
  value and the last ``g`` the gate, which goes through the activation, and their product
  passed on (``activation="gelu"`` gives GEGLU layers, ``"silu"`` SwiGLU). The widths ``g``
  keep the ungated model's parameter count (:func:`gated_features`): Shazeer's 2/3 of each
  width keeps the count of one feed-forward block between two layers of one width, not of this
  stack, so every width is scaled by the one factor that keeps the dense layers' count to within
  the rounding of a width. ``mlp_mnist``'s 784 -> 8x128 -> 10 (217,354 parameters) becomes
  784 -> 8x80 -> 10 (217,130; 8x81 would have 220,978 and 2/3 of 128, 85, 236,650).

  Attributes:
    features: widths of the hidden layers (of the ungated model, when ``gated``).
    num_outputs: width of the linear output layer.
    activation: the activation (:class:`gelujax.linen.Activation`), applied after every hidden
      dense layer (to its gate, when ``gated``).
    dropout: drop rate after every hidden activation.
    dtype: the type the layers and activations compute in (parameters stay float32).
    gated: whether every hidden layer is a gated linear unit.
  """

  features: Sequence[int]
  num_outputs: int
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  gated: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    features = tuple(self.features)
    if self.gated:
      features = gated_features(features, x.shape[-1], self.num_outputs)
    for width in features:
      if self.gated:
        h = nn.Dense(2 * width, kernel_init=unit_norm_init, dtype=self.dtype)(x)
        act = Activation(self.activation)
        x = gated(h, functools.partial(act, deterministic=not train))
      else:
        x = nn.Dense(width, kernel_init=unit_norm_init, dtype=self.dtype)(x)
        x = Activation(self.activation)(x, deterministic=not train)
      x = nn.Dropout(self.dropout)(x, deterministic=not train)
    return nn.Dense(self.num_outputs, kernel_init=unit_norm_init, dtype=self.dtype)(x)


class Autoencoder(nn.Module):
  """A mirrored dense autoencoder with a linear output of the input's shape.

  ``encoder_features=(1000, 500, 250, 30)`` gives the paper's
  784 -> 1000 -> 500 -> 250 -> 30 -> 250 -> 500 -> 1000 -> 784. The activation follows every
  hidden layer, the code layer included; initialisation and dropout are the :class:`MLP`'s.

  Attributes:
    encoder_features: widths of the encoder's layers, the last one being the code.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate after every hidden activation (the paper uses none).
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  encoder_features: Sequence[int] = (1000, 500, 250, 30)
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    encoder = tuple(self.encoder_features)
    decoder = encoder[-2::-1]
    num_pixels = x[0].size
    mlp = MLP(encoder + decoder, num_pixels, self.activation, self.dropout, self.dtype)
    reconstruction = mlp(x, train)
    return reconstruction.reshape(x.shape)
