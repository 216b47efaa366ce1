"""The GELU's forms, each with an exact, twice-differentiable ``custom_jvp`` rule: the exact
:func:`gelu`, its tanh, truncated-tanh and sigmoid approximations, the clipped GELU and the
paper's general form :func:`gaussian_gelu`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from gelujax import _gelu_numerics as num
from gelujax.activations.registry import ACTIVATIONS, bool_problem, number_problem


@ACTIVATIONS.register("gelu", check=lambda a: bool_problem(a, "approximate"))
def gelu(x: ArrayLike, approximate: bool = False) -> Array:
  r"""Gaussian error linear unit, exact form unless ``approximate=True``.

  Computes the element-wise function

  .. math::
    \mathrm{gelu}(x) = x \, \Phi(x) = \frac{x}{2} \, \mathrm{erfc}\left(-\frac{x}{\sqrt{2}}\right),

  where :math:`\Phi` is the standard normal CDF, with the derivatives

  .. math::
    \mathrm{gelu}'(x) = \Phi(x) + x \, \phi(x), \qquad
    \mathrm{gelu}''(x) = \phi(x) \, (2 - x^2).

  ``approximate`` is ``jax.nn.gelu``'s keyword, with the other default: ``approximate=True``
  is :func:`gelu_tanh` (the same function, bitwise), which is what ``jax.nn.gelu(x)`` computes
  by default, while ``gelu(x)`` here is the exact form, ``jax.nn.gelu(x, approximate=False)``.
  ``approximate`` is a Python bool (pass it as a static argument under ``jax.jit``).

  Unlike ``jax.nn.gelu(x, approximate=False)`` (off by 13 ulp near x = -2.8, over 100 ulp
  near x = -10 and without relative accuracy near the root of its derivative), the float32
  value and derivative stay within a few ulp of the exact function over the whole float32
  range: at most 6 ulp for the value and 5 ulp for the derivative, over 2M points including
  the derivative's root at x = -0.7518 and the tail down to the smallest normal float32
  (``benchmarks/results/activations.md`` has the measured maxima and the speed next to
  ``jax.nn.gelu``; smaller results flush to zero). ``gelu(+inf) = +inf`` and
  ``gelu(-inf) = 0``, with derivatives 1 and 0; NaN propagates. Integers and bools are
  computed in the default float dtype, as ``jax.nn.gelu`` does; complex inputs are refused.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_.

  Args:
    x: input array.
    approximate: whether to compute the tanh approximation (:func:`gelu_tanh`) instead.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Raises:
    TypeError: for a complex ``x``, or an ``approximate`` that is no Python bool.

  Examples:
    >>> gelu(jnp.array([-10.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-7.6198530e-23, -1.5865524e-01,  0.0000000e+00,  8.4134477e-01,
            2.9959502e+00], dtype=float32)
    >>> gelu(jnp.array([-1.0, 1.0]), approximate=True)
    Array([-0.158808,  0.841192], dtype=float32)
  """
  if not isinstance(approximate, bool | np.bool_):
    raise TypeError(
      f"gelu(approximate={approximate!r}): approximate must be a Python bool, not "
      f"{type(approximate).__name__} (under jax.jit, make it a static argument)."
    )
  x = num.as_real(x, "gelu")
  return gelu_tanh(x) if approximate else _gelu_exact(x)


@jax.custom_jvp
@jax.jit
def _gelu_exact(x: ArrayLike) -> Array:
  """The exact GELU, ``x * Phi(x)`` (:func:`gelu` without ``approximate``)."""
  return num.apply_pair(num.gelu_and_grad, x)


# The tangent comes from the same accurate pair as the value, whose tail and root of GELU' are
# both relative-accurate; the pair's own rule (GELU'' = phi (2 - x^2)) makes it twice exact.
_gelu_exact.defjvp(num.pair_jvp(num.gelu_and_grad))


@ACTIVATIONS.register("gelu_tanh")
@jax.custom_jvp
@jax.jit
def gelu_tanh(x: ArrayLike) -> Array:
  r"""GELU, tanh approximation (the form used in every experiment of the GELU paper).

  Computes the element-wise function

  .. math::
    \mathrm{gelu\_tanh}(x) = \frac{x}{2}\left[1 + \tanh(u)\right] = x \, \sigma(2u),
    \qquad u = \sqrt{2/\pi} \, (x + 0.044715 x^3),

  with the derivative :math:`\sigma(2u) + 2 x \, \sigma(2u) \sigma(-2u) \, u'(x)`,
  :math:`u'(x) = \sqrt{2/\pi} (1 + 3 \cdot 0.044715 x^2)`. It is evaluated in the sigmoid
  form, which keeps relative accuracy in the negative tail where ``1 + tanh(u)`` cancels, and
  with ``x`` clamped to [-12, 12] (float32) inside ``u``, where it is saturated, so ``x**3``
  never overflows. It is within 5e-4 of the exact :func:`gelu`. This is ``jax.nn.gelu``'s
  default and PyTorch's ``gelu(approximate='tanh')``.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_, section 2.

  Args:
    x: input array.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> gelu_tanh(jnp.array([-3.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-0.00363739, -0.158808  ,  0.        ,  0.841192  ,  2.9963627 ],      dtype=float32)
  """
  return num.apply_pair(num.gelu_tanh_and_grad, x)


# A closed-form tangent of the sigmoid form instead of autodiff through its clamps; the
# sigmoid pair's own rule makes it twice differentiable.
gelu_tanh.defjvp(num.pair_jvp(num.gelu_tanh_and_grad))


@ACTIVATIONS.register("gelu_fast")
@jax.custom_jvp
@jax.jit
def gelu_fast(x: ArrayLike) -> Array:
  r"""GELU, tanh approximation with the constant truncated to 0.7978845608.

  Computes the element-wise function

  .. math::
    \mathrm{gelu\_fast}(x) = \frac{x}{2}\left[1 + \tanh\big(0.7978845608 \, x \,
    (1 + 0.044715 x^2)\big)\right],

  Hugging Face transformers' ``gelu_fast``: :func:`gelu_tanh` with :math:`\sqrt{2/\pi}`
  truncated to ten decimals. The two agree to float32 rounding and differ by about 1e-12 in
  float64; the function exists so that the name maps to the formula it stands for. Derivative
  and evaluation as in :func:`gelu_tanh`.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_, section 2.

  Args:
    x: input array.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> gelu_fast(jnp.array([-3.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-0.00363739, -0.158808  ,  0.        ,  0.841192  ,  2.9963627 ],      dtype=float32)
  """
  return num.apply_pair(num.gelu_fast_and_grad, x)


# As gelu_tanh's: the closed-form tangent of the sigmoid form.
gelu_fast.defjvp(num.pair_jvp(num.gelu_fast_and_grad))


@ACTIVATIONS.register("gelu_sigmoid")
@jax.custom_jvp
@jax.jit
def gelu_sigmoid(x: ArrayLike) -> Array:
  r"""GELU, sigmoid approximation (``quick_gelu`` in Hugging Face transformers and timm).

  Computes the element-wise function

  .. math::
    \mathrm{gelu\_sigmoid}(x) = x \, \sigma(1.702 x),

  with the derivative :math:`\sigma(1.702x) \left[1 + 1.702 x \, \sigma(-1.702x)\right]`.
  It is within 2.1e-2 of the exact :func:`gelu`.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_, section 2.

  Args:
    x: input array.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> gelu_sigmoid(jnp.array([-3.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-0.01807131, -0.15420423,  0.        ,  0.84579575,  2.9819288 ],      dtype=float32)
  """
  return num.apply_pair(num.gelu_sigmoid_and_grad, x)


# A closed-form tangent from the same sigmoid evaluations; the sigmoid pair's own rule makes it
# twice differentiable.
gelu_sigmoid.defjvp(num.pair_jvp(num.gelu_sigmoid_and_grad))


def _clip_problem(arguments: dict[str, Any]) -> str | None:
  lower, upper = arguments["lower"], arguments["upper"]
  problem = number_problem(arguments, "lower", infinite=True) or number_problem(
    arguments, "upper", infinite=True
  )
  if problem is None and not lower <= upper:
    problem = f"lower {lower!r} is above upper {upper!r}; lower must be <= upper"
  return problem


@ACTIVATIONS.register("clipped_gelu", check=_clip_problem)
def clipped_gelu(x: ArrayLike, lower: float = -10.0, upper: float = 10.0) -> Array:
  r"""Exact GELU clipped to ``[lower, upper]`` (Hugging Face transformers' ``gelu_10``).

  Computes the element-wise function

  .. math::
    \mathrm{clipped\_gelu}(x) = \min\big(\max(\mathrm{gelu}(x), \mathrm{lower}),
    \mathrm{upper}\big),

  whose derivative is :math:`\mathrm{gelu}'(x)` where ``lower <= gelu(x) <= upper`` and 0
  outside (as ``torch.clip``'s). No rule of its own is needed: the selection's derivative and
  :func:`gelu`'s exact rule compose. The defaults are ``gelu_10``'s; since GELU is never below
  -0.17, ``lower`` only matters above that. ``lower`` and ``upper`` are Python numbers.

  For more information, see `Q8BERT: Quantized 8Bit BERT <https://arxiv.org/abs/1910.06188>`_.

  Args:
    x: input array.
    lower: the smallest output.
    upper: the largest output, ``>= lower``.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> clipped_gelu(jnp.array([-1.0, 0.0, 3.0, 12.0]))
    Array([-0.15865524,  0.        ,  2.9959502 , 10.        ], dtype=float32)
  """
  if not lower <= upper:
    raise ValueError(
      f"clipped_gelu(lower={lower!r}, upper={upper!r}): lower must be <= upper (both numbers)."
    )
  y = gelu(num.as_real(x, "clipped_gelu"))
  lower, upper = jnp.asarray(lower, y.dtype), jnp.asarray(upper, y.dtype)
  return jnp.where(y > upper, upper, jnp.where(y < lower, lower, y))


@ACTIVATIONS.register(
  "gaussian_gelu",
  check=lambda a: (
    number_problem(a, "mu", array=True)
    or number_problem(a, "sigma", array=True, positive="a standard deviation")
  ),
)
@jax.custom_jvp
@jax.jit
def gaussian_gelu(x: ArrayLike, mu: ArrayLike = 0.0, sigma: ArrayLike = 1.0) -> Array:
  r"""GELU with the CDF of N(mu, sigma**2): the paper's general form.

  Computes the element-wise function

  .. math::
    \mathrm{gaussian\_gelu}(x; \mu, \sigma) = x \, \Phi(z), \qquad z = \frac{x - \mu}{\sigma},

  differentiable in all three arguments:

  .. math::
    \partial_x = \Phi(z) + \frac{x \, \phi(z)}{\sigma}, \quad
    \partial_\mu = -\frac{x \, \phi(z)}{\sigma}, \quad
    \partial_\sigma = -\frac{x \, z \, \phi(z)}{\sigma}.

  ``mu = 0, sigma = 1`` is :func:`gelu`; as ``sigma -> 0`` with ``mu = 0`` it tends to ReLU.
  ``mu`` and ``sigma`` broadcast against ``x`` (e.g. per-feature values) and are cast to
  ``x``'s dtype; ``sigma`` must be positive.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_, section 2.

  Args:
    x: input array.
    mu: mean of the gating normal distribution.
    sigma: its standard deviation, > 0.

  Returns:
    An array of ``x``'s (floating) dtype and the broadcast shape of the three arguments.

  Examples:
    >>> gaussian_gelu(jnp.array([-1.0, 0.0, 1.0, 2.0]), mu=0.5, sigma=2.0)
    Array([-0.22662736,  0.        ,  0.59870636,  1.5467453 ], dtype=float32)
  """
  x, mu, sigma = num.gaussian_args(x, mu, sigma)
  return num.gaussian_gelu_parts(x, mu, sigma)[0].astype(x.dtype)


# Three partials, so not a pair: they share Phi(z) and phi(z) with the value, and the normal
# CDF's exact rule and the plain jnp phi make the rule itself differentiable.
@gaussian_gelu.defjvp
def _gaussian_gelu_jvp(primals, tangents):
  x, mu, sigma = num.gaussian_args(*primals)
  dx, dmu, dsigma = (num.upcast(jnp.asarray(t, x.dtype)) for t in tangents)
  value, cdf, scaled_pdf, z = num.gaussian_gelu_parts(x, mu, sigma)
  tangent = cdf * dx + scaled_pdf * (dx - dmu - z * dsigma)
  return value.astype(x.dtype), jnp.broadcast_to(tangent, value.shape).astype(x.dtype)
