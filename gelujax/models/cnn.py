"""The paper's convolution nets: :class:`CifarCNN` (CIFAR-10's nine convolutions) and
:class:`WideResNet` of :class:`WideResNetBlock` (CIFAR-100's WRN-40-4), with the authors'
Lasagne initialisers and batch norm."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from gelujax.activations import gelu_tanh
from gelujax.conv import Conv
from gelujax.linen import Activation

# Lasagne's HeNormal(gain='relu') and HeNormal(): untruncated normals, std = gain/sqrt(fan_in).
_he_normal_relu = nn.initializers.variance_scaling(2.0, "fan_in", "normal")
_he_normal = nn.initializers.variance_scaling(1.0, "fan_in", "normal")


def _batch_norm(train: bool, dtype: Any) -> nn.BatchNorm:
  # Lasagne's defaults in the authors' CIFAR code: epsilon 1e-4, running averages updated with
  # alpha = 0.1, i.e. Flax momentum 0.9. Flax reduces in float32 whatever ``dtype`` is.
  return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-4, dtype=dtype)


class CifarCNN(nn.Module):
  """The paper's CIFAR-10 network: nine convolutions with batch norm, and BN on the logits.

  ``3x[conv3x3 w0, BN, act] -> maxpool2 -> dropout -> 3x[conv3x3 w1, BN, act] -> maxpool2 ->
  dropout -> conv3x3 w1 valid, BN, act -> 2x[conv1x1 w1, BN, act] -> global average pool ->
  dense -> BN``, with ``widths=(96, 192)`` in the paper. As Lasagne's ``batch_norm`` wrapper did
  in the authors' code, the layers followed by BN have no bias (BN's offset plays its part).
  Kernels are Glorot-uniform.

  Attributes:
    num_classes: number of logits.
    widths: channels of the first and of the second/third groups of convolutions.
    activation: the activation, after every batch norm but the last.
    dropout: drop rate after each max pool.
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  num_classes: int = 10
  widths: tuple[int, int] = (96, 192)
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.5
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    def conv_bn_act(x: jax.Array, features: int, kernel: int, padding) -> jax.Array:
      x = Conv(
        features,
        (kernel, kernel),
        padding=padding,
        use_bias=False,
        kernel_init=nn.initializers.glorot_uniform(),
        dtype=self.dtype,
      )(x)
      x = _batch_norm(train, self.dtype)(x)
      return Activation(self.activation)(x, deterministic=not train)

    for width in self.widths:
      for _ in range(3):
        x = conv_bn_act(x, width, 3, padding=1)
      x = nn.max_pool(x, (2, 2), strides=(2, 2))
      x = nn.Dropout(self.dropout)(x, deterministic=not train)
    x = conv_bn_act(x, self.widths[1], 3, padding="VALID")
    for _ in range(2):
      x = conv_bn_act(x, self.widths[1], 1, padding="VALID")
    x = jnp.mean(x, axis=(1, 2))
    x = nn.Dense(
      self.num_classes,
      use_bias=False,
      kernel_init=nn.initializers.glorot_uniform(),
      dtype=self.dtype,
    )(x)
    return _batch_norm(train, self.dtype)(x)


class WideResNetBlock(nn.Module):
  """The GELU paper's residual block (its authors' Lasagne code, not the usual pre-activation).

  ``conv3x3 (stride) -> act -> dropout -> conv3x3 -> act -> BN``, plus the shortcut: a bias-free
  1x1 projection conv (Glorot-uniform) when ``project``, else the identity. The 3x3 convs have
  biases and He-normal (ReLU gain) kernels; their padding is one pixel on every side, so a
  stride-2 block samples the same positions as its 1x1 projection.

  Attributes:
    features: output channels.
    strides: stride of the first conv and of the projection.
    project: whether the shortcut is a 1x1 projection.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate between the two convs.
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  features: int
  strides: int = 1
  project: bool = False
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    conv = functools.partial(
      Conv, self.features, (3, 3), padding=1, kernel_init=_he_normal_relu, dtype=self.dtype
    )
    y = conv(strides=self.strides)(x)
    y = Activation(self.activation)(y, deterministic=not train)
    y = nn.Dropout(self.dropout)(y, deterministic=not train)
    y = conv()(y)
    y = Activation(self.activation)(y, deterministic=not train)
    y = _batch_norm(train, self.dtype)(y)
    if self.project:
      x = Conv(
        self.features,
        (1, 1),
        strides=self.strides,
        use_bias=False,
        kernel_init=nn.initializers.glorot_uniform(),
        dtype=self.dtype,
      )(x)
    return x + y


class WideResNet(nn.Module):
  """Wide ResNet ``depth``-``width`` with the GELU paper's block (:class:`WideResNetBlock`).

  Stem ``conv3x3 16 (no bias) -> BN -> act -> BN`` (as in the authors' code), then three stages
  of ``(depth - 4) / 6`` blocks with ``16·width``, ``32·width``, ``64·width`` channels (the first
  block of each stage projects its shortcut; stages 2 and 3 start with stride 2), then
  ``BN -> act -> global average pool -> dense`` (He-normal, gain 1, with bias).

  Attributes:
    depth: total depth; ``depth - 4`` must be a positive multiple of 6 (40 in the paper).
    width: widening factor k (4 in the paper).
    num_classes: number of logits.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate inside every block (0.3 in the paper).
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  depth: int = 40
  width: int = 4
  num_classes: int = 100
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.3
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    if self.depth < 10 or (self.depth - 4) % 6:
      raise ValueError(
        f"WideResNet depth={self.depth!r} is not valid: depth - 4 must be a positive multiple "
        "of 6 (e.g. 10, 16, 28, 40)."
      )
    blocks_per_stage = (self.depth - 4) // 6
    x = Conv(16, (3, 3), padding=1, use_bias=False, kernel_init=_he_normal_relu, dtype=self.dtype)(
      x
    )
    x = _batch_norm(train, self.dtype)(x)
    x = Activation(self.activation)(x, deterministic=not train)
    x = _batch_norm(train, self.dtype)(x)
    for stage, channels in enumerate((16, 32, 64)):
      for block in range(blocks_per_stage):
        x = WideResNetBlock(
          channels * self.width,
          strides=2 if stage > 0 and block == 0 else 1,
          project=block == 0,
          activation=self.activation,
          dropout=self.dropout,
          dtype=self.dtype,
        )(x, train)
    x = _batch_norm(train, self.dtype)(x)
    x = Activation(self.activation)(x, deterministic=not train)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes, kernel_init=_he_normal, dtype=self.dtype)(x)
