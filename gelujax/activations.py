"""GELU-family activation functions with exact, twice-differentiable ``custom_jvp`` rules.

Every function here is a pure ``jnp`` function of its inputs. Inputs of dtype bfloat16 and
float16 are computed in float32 and rounded once to the input dtype; float32 is computed in
float32 and float64 in float64. Each differentiable function has a ``jax.custom_jvp`` rule whose
tangent comes from the same accurate evaluation as the value and whose own derivative is
right, so second derivatives (Hessian-vector products, gradient penalties) are exact too. The
numerics (polynomial fits, the exponential, the tails) live in ``gelujax/_gelu_numerics.py``.

Every activation is in the :data:`ACTIVATIONS` registry by name, and models take it by name
(:class:`gelujax.linen.Activation`). The names other frameworks give their GELUs are
registered as aliases written ``framework:name`` with the framework's own arguments, e.g.
``"jax:gelu"``, ``"torch:gelu(approximate='tanh')"`` or ``"transformers:gelu_new"``: the same
word means different formulas in different places (``jax.nn.gelu`` is the tanh approximation
by default, ``torch.nn.functional.gelu`` the exact form; Hugging Face's ``gelu_fast``
truncates ``sqrt(2 / pi)``), so a bare name never stands for another framework's, and the
prefix says whose name it is. Bare ``gelu`` here is the exact ``x * Phi(x)``.
:func:`gelujax.specs.activation_aliases` lists them, and the README's table gives each one's
formula and deviation from exact GELU.

The gated linear units of Shazeer (2020), :func:`geglu`, :func:`swiglu`, :func:`reglu` and
:func:`gated` with any activation, split the input's last axis into a value and a gate; they
halve it, so they are not in :data:`ACTIVATIONS` but in a registry of their own,
:data:`GATED_UNITS`, by which a transformer's feed-forward block takes them by name
(:func:`gelujax.specs.gated_unit`). The Flax Linen modules (:class:`gelujax.linen.Activation`,
:class:`gelujax.linen.LearnableGELU`, registered here as ``learnable_gelu``, and
:class:`gelujax.linen.GatedMLP`, the gated units' feed-forward block) are in :mod:`gelujax.linen`;
their NNX twins in :mod:`gelujax.nnx`. Both apply an activation through
:func:`gelujax.specs.resolve_activation`, the one place a spec becomes a function.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from gelujax import _gelu_numerics as num
from gelujax.registry import Registry

ACTIVATIONS: Registry[Callable[..., Array]] = Registry("activation")


# --- What a spec's arguments may be (`Registry.register`'s ``check``): a spec's literals are
# checked when it is resolved, before any work, not when a traced function first meets them.


def _numbers(value: Any) -> list[Any]:
  """The items of a literal that is a (nested) list or tuple; ``[value]`` for any other."""
  if isinstance(value, list | tuple):
    return [item for part in value for item in _numbers(part)]
  return [value]


def number_problem(
  arguments: dict[str, Any],
  name: str,
  *,
  array: bool = False,
  infinite: bool = False,
  positive: str = "",
) -> str | None:
  """What is wrong with the argument ``name`` of a spec (a clause), or None. It must be a number
  (an int or a float; with ``array``, also a list of them, which broadcasts against the input),
  finite unless ``infinite``; with ``positive`` (what the argument is: ``"a standard
  deviation"``), also > 0 and normal in float32 (the activation divides by it)."""
  value = arguments[name]
  numbers = _numbers(value) if array else [value]
  if not numbers or any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers):
    return f"{name} must be a number{' or a list of numbers' * array}, not {value!r}"
  if not infinite and not all(math.isfinite(v) for v in numbers):
    return f"{name} must be finite, not {value!r}"
  tiny = float(np.finfo(np.float32).tiny)
  if positive and not all(v >= tiny for v in numbers):
    return (
      f"{name} is {positive}, which must be > 0 and normal in float32 (at least {tiny:.3g}), "
      f"not {value!r}"
    )
  return None


def bool_problem(arguments: dict[str, Any], name: str) -> str | None:
  """What is wrong with the argument ``name`` of a spec, which must be True or False, or None."""
  value = arguments[name]
  return None if isinstance(value, bool) else f"{name} must be True or False, not {value!r}"


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


# --- Gated linear units. They halve the last axis, so they are not in ACTIVATIONS, whose entries
# models apply element-wise in place of one another.


def _halves(x: Array, name: str) -> tuple[Array, Array]:
  """``(value, gate)``: the first and second halves of ``x``'s last axis."""
  if x.ndim == 0 or x.shape[-1] % 2:
    raise ValueError(
      f"{name} splits the input's last axis into two halves (value, then gate), so it must have "
      f"an even size; got shape {tuple(x.shape)}."
    )
  return x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]


def _gated(x: ArrayLike, activation: Callable[[Array], Array], name: str) -> Array:
  """``value * activation(gate)``, refusals naming ``name``."""
  value, gate = _halves(num.as_inexact(x, name), name)
  return value * activation(gate)


def gated(x: ArrayLike, activation: Callable[[Array], Array]) -> Array:
  r"""Gated linear unit with any activation: the last axis split into value and gate.

  Computes, for ``x`` whose last axis has even size ``n``,

  .. math::
    \mathrm{gated}(x; f) = x_{[\ldots, :n/2]} \odot f\big(x_{[\ldots, n/2:]}\big):

  the **first half is the value** and the **second half the gate**, which goes through the
  activation ``f``. This is how ``jax.nn.glu`` (``flax.linen.glu``, ``flax.nnx.glu``) and
  PyTorch's ``torch.nn.functional.glu`` split their input, so ``gated(x, jax.nn.sigmoid)`` is
  ``jax.nn.glu(x)``. Shazeer writes the unit with two projections,
  :math:`f(xW) \odot xV`: a fused kernel here is ``[V | W]``; T5X's
  ``MlpBlock(activations=('gelu', 'linear'))`` keeps them apart as ``wi_0`` (through the
  activation: W) and ``wi_1`` (V), so its fused kernel is ``concatenate([wi_1, wi_0], -1)``.
  The derivatives are the product rule's, with ``f``'s own (exact) rule.

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_ and `Language Modeling with Gated Convolutional
  Networks <https://arxiv.org/abs/1612.08083>`_.

  Args:
    x: input array; integers and bools become the default float dtype.
    activation: the gate's activation, e.g. ``get_activation("gelu_tanh")``.

  Returns:
    An array of ``x``'s (floating) dtype and shape, its last axis halved.

  Raises:
    ValueError: for an input whose last axis has odd size, or a scalar.
    TypeError: for a complex input.

  Examples:
    >>> gated(jnp.array([2.0, 1.0]), jax.nn.sigmoid)  # 2 * sigmoid(1)
    Array([1.4621172], dtype=float32)
  """
  return _gated(x, activation, "gated")


@functools.partial(jax.jit, static_argnames="approximate")
def geglu(x: ArrayLike, approximate: bool = False) -> Array:
  r"""GEGLU: a gated linear unit with a GELU gate (Shazeer 2020).

  .. math::
    \mathrm{geglu}(x) = x_{[\ldots, :n/2]} \odot \mathrm{gelu}\big(x_{[\ldots, n/2:]}\big),

  the first half of the last axis the value, the second half the gate (see :func:`gated`).
  The gate is the exact :func:`gelu` unless ``approximate=True`` (:func:`gelu_tanh`, what T5
  v1.1's ``gated-gelu`` computes through ``jax.nn.gelu``'s default).

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_.

  Args:
    x: input array whose last axis has even size.
    approximate: whether the gate is the tanh approximation.

  Returns:
    An array of ``x``'s (floating) dtype and shape, its last axis halved.

  Examples:
    >>> geglu(jnp.array([[2.0, 1.0], [1.0, 2.0]]))  # 2 gelu(1), 1 gelu(2)
    Array([[1.6826895],
           [1.9544997]], dtype=float32)
  """
  return _gated(x, functools.partial(gelu, approximate=approximate), "geglu")


@jax.jit
def swiglu(x: ArrayLike) -> Array:
  r"""SwiGLU: a gated linear unit with a SiLU (Swish, beta = 1) gate (Shazeer 2020).

  .. math::
    \mathrm{swiglu}(x) = x_{[\ldots, :n/2]} \odot \mathrm{silu}\big(x_{[\ldots, n/2:]}\big),

  the first half of the last axis the value, the second half the gate (see :func:`gated`).

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_.

  Args:
    x: input array whose last axis has even size.

  Returns:
    An array of ``x``'s (floating) dtype and shape, its last axis halved.

  Examples:
    >>> swiglu(jnp.array([2.0, 1.0]))  # 2 silu(1)
    Array([1.4621172], dtype=float32)
  """
  return _gated(x, silu, "swiglu")


@jax.jit
def reglu(x: ArrayLike) -> Array:
  r"""ReGLU: a gated linear unit with a ReLU gate (Shazeer 2020).

  .. math::
    \mathrm{reglu}(x) = x_{[\ldots, :n/2]} \odot \max\big(x_{[\ldots, n/2:]}, 0\big),

  the first half of the last axis the value, the second half the gate (see :func:`gated`).

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_.

  Args:
    x: input array whose last axis has even size.

  Returns:
    An array of ``x``'s (floating) dtype and shape, its last axis halved.

  Examples:
    >>> reglu(jnp.array([2.0, -1.0, 3.0, 0.5]))  # [2 relu(3), -1 relu(0.5)]
    Array([ 6. , -0.5], dtype=float32)
  """
  return _gated(x, relu, "reglu")


def _gate_problem(arguments: dict[str, Any]) -> str | None:
  """What is wrong with ``gated``'s ``activation`` in a spec, which must be an activation spec."""
  value = arguments["activation"]
  if isinstance(value, str):
    return None
  return f"activation must be the gate's activation spec, such as 'silu', not {value!r}"


# The gated linear units by name, as a transformer's `activation` takes them
# (`gelujax.specs.gated_unit`, which also knows these functions given themselves). A spec of
# `gated` names its gate's activation, "gated(activation='gelu_tanh')", which the resolver
# resolves, since a spec's literals cannot be functions.
GATED_UNITS: Registry[Callable[..., Array]] = Registry("gated linear unit")
GATED_UNITS.register("geglu", geglu, check=lambda a: bool_problem(a, "approximate"))
GATED_UNITS.register("swiglu", swiglu)
GATED_UNITS.register("reglu", reglu)
GATED_UNITS.register("gated", gated, check=_gate_problem)


# Other frameworks' GELUs by the names their users meet, each mapped to the gelujax function
# that computes the same formula (tests/test_activations.py checks each against the
# framework's own formula in float64). PyTorch: torch.nn.GELU and torch.nn.functional.gelu,
# approximate='none' (default) or 'tanh'.
ACTIVATIONS.alias("torch:gelu", "gelu")
ACTIVATIONS.alias("torch:gelu(approximate='none')", "gelu")
ACTIVATIONS.alias("torch:gelu(approximate='tanh')", "gelu_tanh")
# JAX and Flax (flax.linen.gelu and flax.nnx.gelu are jax.nn.gelu): the tanh form by default.
ACTIVATIONS.alias("jax:gelu", "gelu_tanh")
ACTIVATIONS.alias("jax:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("jax:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("flax:gelu", "gelu_tanh")
ACTIVATIONS.alias("flax:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("flax:gelu(approximate=False)", "gelu")
# TensorFlow's tf.nn.gelu and Keras' keras.activations.gelu (activation="gelu" in a layer):
# the exact form by default (Keras 3's keras.ops.gelu is not: its default is approximate=True).
ACTIVATIONS.alias("tf:gelu", "gelu")
ACTIVATIONS.alias("tf:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("tf:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("keras:gelu", "gelu")
ACTIVATIONS.alias("keras:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("keras:gelu(approximate=True)", "gelu_tanh")
# Hugging Face transformers: the ACT2FN keys of config.json's hidden_act.
ACTIVATIONS.alias("transformers:gelu", "gelu")
ACTIVATIONS.alias("transformers:gelu_python", "gelu")
ACTIVATIONS.alias("transformers:gelu_new", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_pytorch_tanh", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_python_tanh", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_accurate", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_fast", "gelu_fast")
ACTIVATIONS.alias("transformers:quick_gelu", "gelu_sigmoid")
ACTIVATIONS.alias("transformers:gelu_10", "clipped_gelu(lower=-10.0, upper=10.0)")
# timm (timm.layers.get_act_layer / get_act_fn names).
ACTIVATIONS.alias("timm:gelu", "gelu")
ACTIVATIONS.alias("timm:gelu_tanh", "gelu_tanh")
ACTIVATIONS.alias("timm:quick_gelu", "gelu_sigmoid")
