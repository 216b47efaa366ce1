"""The convolution of every gelujax model: ``nn.Conv`` with its kernel gradient computed in the
layout XLA:CPU's fast kernels expect (jax-ml/jax#12868; ``benchmarks/results/conv.md``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

_NHWC = ("NHWC", "HWIO", "NHWC")


def _lax_conv_nhwc(x: jax.Array, kernel: jax.Array, strides: tuple, padding: tuple) -> jax.Array:
  return jax.lax.conv_general_dilated(x, kernel, strides, padding, dimension_numbers=_NHWC)


_conv_nhwc = jax.custom_vjp(_lax_conv_nhwc, nondiff_argnums=(2, 3))


def _conv_nhwc_fwd(x, kernel, strides, padding):
  return _conv_nhwc(x, kernel, strides, padding), (x, kernel)


def _conv_nhwc_bwd(strides, padding, residuals, dy):
  x, kernel = residuals
  _, input_vjp = jax.vjp(lambda x: _lax_conv_nhwc(x, kernel, strides, padding), x)
  (dx,) = input_vjp(dy)
  # dK[i, j, c, o] = sum over b, h, w of x_padded[b, s h + i, s w + j, c] dy[b, h, w, o]: a
  # stride-1 convolution of x's channels (as the batch) by dy dilated by the strides, both
  # transposed explicitly into the NHWC/HWIO layout (see `conv_general_dilated`).
  dk = jax.lax.conv_general_dilated(
    jnp.transpose(x, (3, 1, 2, 0)),
    jnp.transpose(dy, (1, 2, 0, 3)),
    (1, 1),
    padding,
    rhs_dilation=strides,
    dimension_numbers=_NHWC,
  )
  height, width = kernel.shape[:2]
  return dx, jnp.transpose(dk[:, :height, :width], (1, 2, 0, 3))


_conv_nhwc.defvjp(_conv_nhwc_fwd, _conv_nhwc_bwd)


def conv_general_dilated(
  lhs: jax.Array,
  rhs: jax.Array,
  window_strides: Sequence[int],
  padding: str | Sequence[tuple[int, int]],
  lhs_dilation: Sequence[int] | None = None,
  rhs_dilation: Sequence[int] | None = None,
  dimension_numbers: jax.lax.ConvDimensionNumbers | None = None,
  feature_group_count: int = 1,
  precision=None,
) -> jax.Array:
  """``lax.conv_general_dilated`` for ``nn.Conv``, with the kernel gradient in NHWC layout.

  XLA:CPU computes the kernel gradient that JAX derives for a convolution 36-86x slower inside
  a loop (the trainer's ``lax.scan`` over steps) than this one (``benchmarks/results/conv.md``),
  as its operands' transposed layout then misses the fast convolution kernels
  (jax-ml/jax#12868; a CIFAR-10 step took five minutes). For the 2-D NHWC/HWIO convolutions
  of these models, undilated and ungrouped, the kernel gradient is therefore computed from
  explicitly transposed operands, the same numbers in the layout XLA expects; any other
  convolution goes to ``lax`` unchanged.
  """
  plain = (
    len(window_strides) == 2
    and all(d == 1 for d in (*(lhs_dilation or ()), *(rhs_dilation or ())))
    and feature_group_count == 1
    and precision is None
    and jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    == jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, _NHWC)
  )
  if not plain:
    return jax.lax.conv_general_dilated(
      lhs,
      rhs,
      window_strides,
      padding,
      lhs_dilation,
      rhs_dilation,
      dimension_numbers,
      feature_group_count=feature_group_count,
      precision=precision,
    )
  if isinstance(padding, str):
    padding = jax.lax.padtype_to_pads(lhs.shape[1:3], rhs.shape[:2], window_strides, padding)
  pads = tuple((int(lo), int(hi)) for lo, hi in padding)
  return _conv_nhwc(lhs, rhs, tuple(int(s) for s in window_strides), pads)


# Every model's convolution.
Conv = functools.partial(nn.Conv, conv_general_dilated=conv_general_dilated)
