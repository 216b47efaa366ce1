"""The stochastic 0-I map of the 2016 GELU draft, :func:`soi_map`, whose expectation is the
GELU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

from gelujax import _gelu_numerics as num
from gelujax.activations.gelus import gelu
from gelujax.activations.registry import ACTIVATIONS


@ACTIVATIONS.register(
  "soi_map",
  check=lambda a: (
    f"soi_map takes no arguments in a spec (its key and train come from the model), not {a}"
  ),
)
def soi_map(x: ArrayLike, key: Array | None, train: bool) -> Array:
  r"""Stochastic 0-I map of the 2016 GELU draft, whose expectation is the GELU.

  In training, computes :math:`x \cdot \mathbb{1}[U < \Phi(x)]` with :math:`U \sim U(0, 1)`
  drawn from ``key``; otherwise its expectation :math:`x \, \Phi(x)` (:func:`gelu`). Under
  differentiation in training the mask is a constant, so the gradient is the mask.

  For more information, see `Bridging Nonlinearities and Stochastic Regularizers with
  Gaussian Error Linear Units <https://arxiv.org/abs/1606.08415v1>`_.

  Args:
    x: input array.
    key: a PRNG key; only used (and required) when ``train``.
    train: whether to draw the stochastic mask.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> soi_map(jnp.array([-1.0, 0.0, 1.0]), None, train=False)
    Array([-0.15865524,  0.        ,  0.8413448 ], dtype=float32)
  """
  x = num.as_inexact(x, "soi_map")
  if not train:
    return gelu(x)
  if key is None:
    raise ValueError("soi_map(train=True) draws a random mask and needs a PRNG key; got None.")
  x_c = num.upcast(x)
  keep = jax.random.uniform(key, x.shape, x_c.dtype) < num.normal_cdf(jax.lax.stop_gradient(x_c))
  return jnp.where(keep, x, jnp.zeros_like(x))
