"""The element-wise activations the GELU is compared with: SiLU, ReLU, ELU, and the identity (a
control), each with an exact ``custom_jvp`` rule where it needs one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

from gelujax import _gelu_numerics as num
from gelujax.activations.registry import ACTIVATIONS, number_problem


@ACTIVATIONS.register("silu")
@jax.custom_jvp
@jax.jit
def silu(x: ArrayLike) -> Array:
  r"""SiLU (swish) activation.

  Computes the element-wise function

  .. math::
    \mathrm{silu}(x) = x \, \sigma(x) = \frac{x}{1 + e^{-x}},

  with the derivative :math:`\sigma(x) \left[1 + x \, \sigma(-x)\right]`.

  For more information, see `Sigmoid-Weighted Linear Units for Neural Network Function
  Approximation in Reinforcement Learning <https://arxiv.org/abs/1702.03118>`_.

  Args:
    x: input array.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> silu(jnp.array([-3.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-0.14227763, -0.26894143,  0.        ,  0.7310586 ,  2.8577223 ],      dtype=float32)
  """
  return num.apply_pair(num.silu_and_grad, x)


# A closed-form tangent from the same sigmoid evaluations; the sigmoid pair's own rule makes it
# twice differentiable.
silu.defjvp(num.pair_jvp(num.silu_and_grad))


@ACTIVATIONS.register("relu")
def relu(x: ArrayLike) -> Array:
  r"""Rectified linear unit, ``max(x, 0)``, with ``relu'(0) = 0`` (``jax.nn.relu``).

  .. math::
    \mathrm{relu}(x) = \max(x, 0)

  For more information, see `Rectified Linear Units Improve Restricted Boltzmann Machines
  <https://www.cs.toronto.edu/~hinton/absps/reluICML.pdf>`_.

  Args:
    x: input array.

  Returns:
    An array of the same shape and dtype as ``x``.

  Examples:
    >>> relu(jnp.array([-1.0, 0.0, 2.0]))
    Array([0., 0., 2.], dtype=float32)
  """
  return jax.nn.relu(num.as_real(x, "relu"))


@ACTIVATIONS.register("identity")
def identity(x: ArrayLike) -> Array:
  r"""The identity, ``x``: a network of it is linear. A control for studies, not a unit to train
  with: a linear network's gap to a nonlinear one is large and known (on Fashion-MNIST, about 4
  points of test accuracy: Xiao et al., 2017, report logistic regression at about 84%, multilayer
  perceptrons at about 87-88%).

  Args:
    x: input array; integers and bools become floats, as in ``jax.nn.gelu``.

  Returns:
    ``x``, floating.

  Examples:
    >>> identity(jnp.array([-1.0, 0.0, 2.0]))
    Array([-1.,  0.,  2.], dtype=float32)
  """
  x = num.as_real(x, "identity")
  return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


@ACTIVATIONS.register("elu", check=lambda a: number_problem(a, "alpha", array=True))
@jax.custom_jvp
@jax.jit
def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
  r"""Exponential linear unit.

  Computes the element-wise function

  .. math::
    \mathrm{elu}(x) = \begin{cases} x, & x > 0 \\ \alpha (e^x - 1), & x \le 0 \end{cases}

  with the derivatives :math:`\partial_x = 1` for :math:`x > 0` and :math:`\alpha e^x`
  otherwise, and :math:`\partial_\alpha = e^x - 1` for :math:`x \le 0`. ``alpha`` is cast to
  ``x``'s dtype.

  For more information, see `Fast and Accurate Deep Network Learning by Exponential Linear
  Units (ELUs) <https://arxiv.org/abs/1511.07289>`_.

  Args:
    x: input array.
    alpha: the negative saturation value.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> elu(jnp.array([-2.0, 0.0, 2.0]))
    Array([-0.86466473,  0.        ,  2.        ], dtype=float32)
  """
  x = num.as_inexact(x, "elu")
  x_c, alpha_c = num.upcast(x), num.upcast(jnp.asarray(alpha, x.dtype))
  return jnp.where(x_c > 0, x_c, alpha_c * jnp.expm1(jnp.minimum(x_c, 0))).astype(x.dtype)


# Closed-form partials in x and alpha; expm1 of min(x, 0) keeps the untaken branch from
# overflowing, which would poison the second derivative through jnp.where.
@elu.defjvp
def _elu_jvp(primals, tangents):
  x = num.as_inexact(primals[0], "elu")
  x_c = num.upcast(x)
  alpha_c = num.upcast(jnp.asarray(primals[1], x.dtype))
  dx, dalpha = (num.upcast(jnp.asarray(t, x.dtype)) for t in tangents)
  em1 = jnp.expm1(jnp.minimum(x_c, 0))
  positive = x_c > 0
  value = jnp.where(positive, x_c, alpha_c * em1)
  tangent = jnp.where(positive, dx, alpha_c * (em1 + 1) * dx + em1 * dalpha)
  return value.astype(x.dtype), tangent.astype(x.dtype)
