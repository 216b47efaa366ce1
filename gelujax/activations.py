"""GELU-family activation functions with exact, twice-differentiable ``custom_jvp`` rules.

Every function here is a pure ``jnp`` function of its inputs. Inputs of dtype bfloat16 and
float16 are computed in float32 and rounded once to the input dtype; float32 is computed in
float32 and float64 in float64. Each differentiable function has a ``jax.custom_jvp`` rule whose
tangent is computed with the same accurate primitives as the value, and whose own derivative
is right, so second derivatives (Hessian-vector products, gradient penalties) are exact too.

The exact GELU and the normal CDF behind it are evaluated with a scheme that keeps float32
relative accuracy in the far negative tail, where ``x * erfc(-x / sqrt(2)) / 2`` loses about
``x**2`` ulp to the rounding of its argument: ``Phi(-a) = exp(-a**2 / 2) * m(a)`` with
``a`` split into a 12-bit head (whose square is exact) and a small tail that meet inside the
exponential's range reduction, and the scaled complementary error function
``m(a) = erfcx(a / sqrt(2)) / 2`` as a degree-12 polynomial in ``t = 3 / (3 + a)`` (a
relative-weighted Chebyshev least-squares fit, see scripts/fit_gelu_polynomials.py). GELU'
gets its own polynomial with its root factored out, so it is relative-accurate there too.
The code avoids the XLA operations that are slow on CPU or that force intermediates to memory
(``jnp.exp``, floor, float-to-int conversion): value and derivative are each one fused loop.

Results below the smallest normal float32 (``|y| < 1.2e-38``, i.e. GELU(x) for x < -13.1) are
flushed to zero, as XLA does on CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from jax import Array
from jax.typing import ArrayLike

from gelujax.registry import Registry, parse_name

ACTIVATIONS: Registry[Callable[..., Array]] = Registry("activation")

# Degree-12 polynomials in t = _T_SCALE / (_T_SCALE + a), a = |x|, refitted by
# scripts/fit_gelu_polynomials.py (relative fit error 1e-9; float32 evaluation dominates).
# m(a) / t, where m(a) = Phi(-a) exp(a**2 / 2) = erfcx(a / sqrt(2)) / 2; coefficients of t**0..12.
_T_SCALE = 3.0
_MILLS_COEFFS = (
  0.13298076391220093, 0.1329808086156845, 0.11820188909769058, 0.08873497694730759,
  0.04820065200328827, 0.017897972837090492, -0.0566004179418087, 0.10070808231830597,
  -0.2734626531600952, 0.3645747900009155, -0.2494661659002304, 0.08821102976799011,
  -0.012961736880242825,
)  # fmt: skip
# GELU'(-a) = exp(-a**2 / 2) (_ROOT - a) s(a): GELU' has one root, at x = -_ROOT, and s(a) is
# smooth and positive; coefficients of s as a polynomial in t, t**0..12.
_ROOT_HI = 0.7517915368080139  # float32(_ROOT)
_ROOT_LO = -1.211444945855772e-08  # _ROOT - _ROOT_HI
_ROOT_COEFFS = (
  0.3989422917366028, 0.09997383505105972, 0.08069853484630585, 0.056630924344062805,
  0.03096754290163517, 0.012556888163089752, -0.017002394422888756, 0.02815653383731842,
  -0.07485173642635345, 0.08488382399082184, -0.04806933179497719, 0.013779661618173122,
  -0.001588563434779644,
)  # fmt: skip
# Past these |x| every GELU, derivative and sigmoid is saturated (0, 1 or x) in float32 (and
# in float64 for the dicts' second entries), so clamping there changes no result and keeps
# +-inf from producing inf * 0 = NaN.
_NORMAL_CLAMP = {np.dtype(np.float32): 14.0, np.dtype(np.float64): 40.0}
_EXP_SCALE = 2.0**24
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # 16 significant bits: k * _LN2_HI is exact for k < 256
_LN2_LO = 1.4286068203094172e-06
_UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
_ROUND_MAGIC = 12582912.0  # 1.5 * 2**23
_SCALE_BITS = np.int32(127 + 24 + 0x4B400000)  # exponent of 2**24, plus bits(_ROUND_MAGIC)
_EXP_NEG_COEFFS = (1.0, -1.0, 1 / 2, -1 / 6, 1 / 24, -1 / 120, 1 / 720, -1 / 5040)
_SIGMOID_CLAMP = 128.0
_TANH_CLAMP = {np.dtype(np.float32): 12.0, np.dtype(np.float64): 26.0}
_ROOT_COEFFS_U = tuple(c * _T_SCALE**k for k, c in enumerate(_ROOT_COEFFS))
_SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))
_INV_SQRT_2PI = float(1 / np.sqrt(2 * np.pi))
_GELU_TANH_COEFF = 0.044715
_GELU_SIGMOID_SCALE = 1.702


def _compute_dtype(dtype: np.dtype) -> np.dtype:
  """The dtype an activation computes in: float32 for narrower floats, else the input's."""
  return np.dtype(np.float32) if np.dtype(dtype).itemsize < 4 else np.dtype(dtype)


def _as_inexact(x: ArrayLike) -> Array:
  """``x`` as an array; integers and bools become the default float dtype, as in jax.nn."""
  x = jnp.asarray(x)
  return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def _upcast(x: Array) -> Array:
  return x.astype(_compute_dtype(x.dtype))


def _polyval(coeffs: tuple[float, ...], t: Array) -> Array:
  """Horner's rule with the coefficients cast to ``t``'s dtype (lowest degree first)."""
  acc = jnp.full_like(t, coeffs[-1])
  for c in coeffs[-2::-1]:
    acc = acc * t + jnp.asarray(c, t.dtype)
  return acc


def _exp_neg_half_square(a: Array) -> Array:
  """``exp(-a**2 / 2) * 2**24`` for ``0 <= a <= clamp``, without the ~a**2 ulp error of ``a * a``.

  float32: ``a = a_hi + a_lo`` with ``a_hi`` the top 12 significand bits, so
  ``y = a**2 / 2 = a_hi**2 / 2 + a_lo (a + a_hi) / 2`` with an exact head, and head and tail
  meet inside the range reduction of :func:`_exp_neg_scaled` instead of being rounded
  together: accurate to ~1 ulp for any ``a``. The ``2**24`` scale keeps the result normal
  down to GELU's own underflow, where XLA flushes subnormals to zero; callers multiply it out
  last. Under differentiation ``a_hi`` and ``k`` are constants and ``d/da`` of the tail is
  exactly ``a``, so the derivative is right.
  float64 uses ``jnp.exp``.
  """
  if a.dtype != np.float32:
    return jnp.exp(-0.5 * a * a) * _EXP_SCALE
  bits = jax.lax.bitcast_convert_type(a, np.uint32) & np.uint32(0xFFFFF000)
  a_hi = jax.lax.stop_gradient(jax.lax.bitcast_convert_type(bits, np.float32))
  return _exp_neg_scaled(0.5 * a_hi * a_hi, 0.5 * (a - a_hi) * (a + a_hi))


def _exp_neg_scaled(head: Array, tail: Array | float = 0.0) -> Array:
  """``exp(-(head + tail)) * 2**24`` in float32 for ``0 <= head + tail <= 104``, to ~1 ulp.

  Range reduction ``head + tail = k ln2 + r`` with ``k ln2`` in two parts and ``tail`` added
  after them, ``|r| <= ln2 / 2``, then a degree-7 Taylor polynomial (error 6e-9). Written with
  float arithmetic and cheap integer ops only: XLA's CPU ``exp``, floor and float-to-int
  conversion cost several multiply-adds each, and an ``exp`` shared by two outputs is
  materialised in memory, where this is fused into each consumer's loop.
  """
  # Round-to-nearest by the 1.5 * 2**23 trick; the sum's low bits then hold k itself. The
  # no-op OR with the magic's own bits keeps XLA from folding (v + M) - M into v.
  k_magic = jax.lax.stop_gradient((head + tail) * _LOG2E + _ROUND_MAGIC)
  k_bits = jax.lax.bitcast_convert_type(k_magic, np.int32) | np.int32(0x4B400000)
  k = jax.lax.bitcast_convert_type(k_bits, np.float32) - _ROUND_MAGIC
  r = ((head - k * _LN2_HI) - k * _LN2_LO) + tail
  # 2**(24 - k) = bits (151 - k) << 23; the int32 wraparound drops the magic's high bits.
  scale = jax.lax.bitcast_convert_type((_SCALE_BITS - k_bits) << 23, np.float32)
  return _polyval(_EXP_NEG_COEFFS, r) * scale


def _normal_tail(z: Array) -> tuple[Array, Array]:
  """``(a, e) = (min(|z|, clamp), exp(-a**2 / 2) * 2**24)``, the start of every normal-CDF form."""
  a = jnp.minimum(jnp.abs(z), jnp.asarray(_NORMAL_CLAMP[z.dtype], z.dtype))
  return a, _exp_neg_half_square(a)


def _mills(a: Array) -> Array:
  """``m(a) = Phi(-a) * exp(a**2 / 2)`` for ``0 <= a <= clamp`` (see the module docstring)."""
  if a.dtype != np.float32:
    return 0.5 * jax.scipy.special.erfcx(a * np.sqrt(0.5).astype(a.dtype))
  t = _t_variable(a)
  return t * _polyval(_MILLS_COEFFS, t)


def _t_variable(a: Array) -> Array:
  """The polynomial variable ``t = 3 / (3 + a)`` in (0, 1]."""
  return _T_SCALE / (_T_SCALE + a)


@jax.custom_jvp
def _normal_cdf(z: Array) -> Array:
  """Phi(z), relative-accurate in both tails (for the complement 1 - Phi too)."""
  a, e = _normal_tail(z)
  lower = (e * _mills(a)) * (1 / _EXP_SCALE)
  return jnp.where(z < 0, lower, 1 - lower)


# Differentiating the tail approximation would give the derivative of the polynomial; Phi' is
# known exactly, and _normal_pdf is plain jnp, so every higher derivative follows too.
_normal_cdf.defjvps(lambda t, ans, z: _normal_pdf(z) * t)


def _normal_pdf(z: Array) -> Array:
  """phi(z) = exp(-z**2 / 2) / sqrt(2 pi); 0 at +-inf."""
  return (_INV_SQRT_2PI * _normal_tail(z)[1]) * (1 / _EXP_SCALE)


def _copysign_one(x: Array) -> Array:
  """+1.0 or -1.0 with the sign bit of ``x`` (NaN keeps its own sign bit)."""
  sign_bit = jax.lax.bitcast_convert_type(x, _UINT[x.dtype]) & _UINT[x.dtype](
    1 << (8 * x.dtype.itemsize - 1)
  )
  one = jax.lax.bitcast_convert_type(jnp.ones_like(x), _UINT[x.dtype])
  return jax.lax.bitcast_convert_type(sign_bit | one, x.dtype)


@jax.custom_jvp
def _gelu_and_grad(x: Array) -> tuple[Array, Array]:
  """``(GELU(x), GELU'(x))`` for float32 or float64 ``x``, sharing the exponential."""
  a, e = _normal_tail(x)
  if x.dtype == np.float32:
    t = _t_variable(a)
    m = t * _polyval(_MILLS_COEFFS, t)
    # _ROOT_HI - a is exact near the root (Sterbenz), so GELU' keeps its relative accuracy
    # there; _ROOT_LO is added after the product so XLA cannot fold it into _ROOT_HI.
    # s(t) with t = 3u, u = 1 / (3 + a): a division of its own, which XLA fuses into the
    # derivative's loop, where a t shared with the value would be materialised in memory.
    u = 1 / (_T_SCALE + a)
    s = _polyval(_ROOT_COEFFS_U, u)
    low_grad = (e * ((_ROOT_HI - a) * s + _ROOT_LO * s)) * (1 / _EXP_SCALE)
  else:
    m = _mills(a)
    low_grad = (e * (m - a * _INV_SQRT_2PI)) * (1 / _EXP_SCALE)
  # x Phi(-a) multiplies x into m before the exponential so that no intermediate underflows
  # before the result does; the clamp keeps -inf * 0 from giving NaN.
  x_low = jnp.maximum(x, -_NORMAL_CLAMP[x.dtype])
  lower = (e * m) * (1 / _EXP_SCALE)
  value = jnp.where(x < 0, ((x_low * m) * e) * (1 / _EXP_SCALE), x * (1 - lower))
  # GELU'(x) = step(x) - sign(x) w, exact (w is 0 at +-inf thanks to the clamp on a).
  sign = _copysign_one(x)
  grad = (0.5 + 0.5 * sign) - sign * low_grad
  return value, grad


# The pair's own derivative is (GELU', GELU'') with GELU''(x) = phi(x) (2 - x**2): this is what
# makes second derivatives of `gelu` exact rather than derivatives of the polynomial fit.
@_gelu_and_grad.defjvp
def _gelu_and_grad_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  value, grad = _gelu_and_grad(x)
  a, e = _normal_tail(x)
  hess = (_INV_SQRT_2PI * e * (2 - a * a)) * (1 / _EXP_SCALE)
  return (value, grad), (grad * t, hess * t)


@jax.custom_jvp
@jax.jit
def gelu(x: ArrayLike) -> Array:
  r"""Gaussian error linear unit, exact form.

  Computes the element-wise function

  .. math::
    \mathrm{gelu}(x) = x \, \Phi(x) = \frac{x}{2} \, \mathrm{erfc}\left(-\frac{x}{\sqrt{2}}\right),

  where :math:`\Phi` is the standard normal CDF, with the derivative

  .. math::
    \mathrm{gelu}'(x) = \Phi(x) + x \, \phi(x), \qquad
    \mathrm{gelu}''(x) = \phi(x) \, (2 - x^2).

  Unlike ``jax.nn.gelu(x, approximate=False)`` (off by 13 ulp near x = -2.8, over 100 ulp
  near x = -10 and without relative accuracy near the root of its derivative), the float32
  value and derivative stay within a few ulp of the exact function over the whole float32
  range: measured maximum 5.8 ulp for the value and 4.4 ulp for the derivative, over 2M points
  including the derivative's root at x = -0.7518 and the tail down to the smallest normal
  float32 (see ``benchmarks/results/activations.md``; smaller results flush to zero). On CPU
  the forward pass is as fast as ``jax.nn.gelu(x, approximate=True)`` and forward+backward is
  1.3x faster than ``jax.nn.gelu(x, approximate=False)``. ``gelu(+inf) = +inf`` and
  ``gelu(-inf) = 0``, with derivatives 1 and 0; NaN propagates.

  For more information, see `Gaussian Error Linear Units (GELUs)
  <https://arxiv.org/abs/1606.08415>`_.

  Args:
    x: input array.

  Returns:
    An array of the same shape and (floating) dtype as ``x``.

  Examples:
    >>> gelu(jnp.array([-10.0, -1.0, 0.0, 1.0, 3.0]))
    Array([-7.6198530e-23, -1.5865524e-01,  0.0000000e+00,  8.4134477e-01,
            2.9959502e+00], dtype=float32)
  """
  x = _as_inexact(x)
  return _gelu_and_grad(_upcast(x))[0].astype(x.dtype)


# The tangent comes from the same accurate pair as the value (the derivative's tail and its
# root are both handled there); differentiating the rule again uses the pair's own rule.
@gelu.defjvp
def _gelu_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  x = _as_inexact(x)
  value, grad = _gelu_and_grad(_upcast(x))
  return value.astype(x.dtype), (grad * _upcast(t)).astype(x.dtype)


@jax.custom_jvp
def _sigmoids(z: Array) -> tuple[Array, Array]:
  """``(sigma(z), sigma(-z))`` from one exponential and one division, relative-accurate in
  both tails and never inf / inf."""
  if z.dtype == np.float32:
    y = jnp.minimum(jnp.abs(z), 104.0)  # exp(-104) is already 0 in float32
    e = _exp_neg_scaled(y) * (1 / _EXP_SCALE)
  else:
    e = jnp.exp(-jnp.abs(z))
  r = 1 / (1 + e)
  positive = z >= 0
  return jnp.where(positive, r, e * r), jnp.where(positive, e * r, r)


# sigma' = sigma(z) sigma(-z), in terms of the pair itself, so it is differentiable to any
# order (autodiff of the |z| form would give a wrong derivative at exactly z = 0).
@_sigmoids.defjvp
def _sigmoids_jvp(primals, tangents):
  (z,), (t,) = primals, tangents
  s, s_neg = _sigmoids(z)
  ds = s * s_neg * t
  return (s, s_neg), (ds, -ds)


def _scaled_silu_and_grad(x: Array, k: float) -> tuple[Array, Array]:
  """``(x sigma(k x), d/dx)`` with +-inf mapped to (inf, 1) and (0, 0)."""
  kx = jnp.asarray(k, x.dtype) * x
  s, s_neg = _sigmoids(kx)
  x_c = jnp.clip(x, -_SIGMOID_CLAMP, _SIGMOID_CLAMP)
  value = jnp.maximum(x, -_SIGMOID_CLAMP) * s
  grad = s * (1 + jnp.asarray(k, x.dtype) * x_c * s_neg)
  return value, grad


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
  with ``x`` clamped to [-12, 12] (float32) inside ``u``, where it is saturated, so ``x**3`` never
  overflows. It is within 5e-4 of the exact :func:`gelu`.

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
  x = _as_inexact(x)
  return _gelu_tanh_and_grad(_upcast(x))[0].astype(x.dtype)


# The rule differentiates the sigmoid form in closed form (through _sigmoids' own rule for the
# second derivative) instead of tracing through the clamps.
@gelu_tanh.defjvp
def _gelu_tanh_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  x = _as_inexact(x)
  value, grad = _gelu_tanh_and_grad(_upcast(x))
  return value.astype(x.dtype), (grad * _upcast(t)).astype(x.dtype)


def _gelu_tanh_and_grad(x: Array) -> tuple[Array, Array]:
  clamp = _TANH_CLAMP[x.dtype]
  x_c = jnp.clip(x, -clamp, clamp)
  c0 = jnp.asarray(_SQRT_2_OVER_PI, x.dtype)
  c1 = jnp.asarray(_GELU_TANH_COEFF, x.dtype)
  two_u = 2 * c0 * x_c * (1 + c1 * x_c * x_c)
  s, s_neg = _sigmoids(two_u)
  value = jnp.maximum(x, -clamp) * s
  grad = s + 2 * c0 * x_c * s * s_neg * (1 + 3 * c1 * x_c * x_c)
  return value, grad


@jax.custom_jvp
@jax.jit
def gelu_sigmoid(x: ArrayLike) -> Array:
  r"""GELU, sigmoid approximation.

  Computes the element-wise function

  .. math::
    \mathrm{gelu\_sigmoid}(x) = x \, \sigma(1.702 x),

  with the derivative :math:`\sigma(1.702x) \left[1 + 1.702 x \, \sigma(-1.702x)\right]`.
  It is within 2e-2 of the exact :func:`gelu`.

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
  x = _as_inexact(x)
  return _scaled_silu_and_grad(_upcast(x), _GELU_SIGMOID_SCALE)[0].astype(x.dtype)


# Closed-form tangent from the same sigmoid evaluations; _sigmoids' rule makes it twice
# differentiable.
@gelu_sigmoid.defjvp
def _gelu_sigmoid_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  x = _as_inexact(x)
  value, grad = _scaled_silu_and_grad(_upcast(x), _GELU_SIGMOID_SCALE)
  return value.astype(x.dtype), (grad * _upcast(t)).astype(x.dtype)


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
  x = _as_inexact(x)
  return _scaled_silu_and_grad(_upcast(x), 1.0)[0].astype(x.dtype)


# Closed-form tangent from the same sigmoid evaluations; _sigmoids' rule makes it twice
# differentiable.
@silu.defjvp
def _silu_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  x = _as_inexact(x)
  value, grad = _scaled_silu_and_grad(_upcast(x), 1.0)
  return value.astype(x.dtype), (grad * _upcast(t)).astype(x.dtype)


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
  x, mu, sigma = _gaussian_args(x, mu, sigma)
  return _gaussian_gelu_parts(x, mu, sigma)[0].astype(x.dtype)


# The partials share Phi(z) and phi(z) with the value; _normal_cdf's exact rule and the plain
# jnp phi make the rule itself differentiable, hence exact second derivatives.
@gaussian_gelu.defjvp
def _gaussian_gelu_jvp(primals, tangents):
  x, mu, sigma = _gaussian_args(*primals)
  dx, dmu, dsigma = (_upcast(jnp.asarray(t, x.dtype)) for t in tangents)
  value, cdf, scaled_pdf, z = _gaussian_gelu_parts(x, mu, sigma)
  tangent = cdf * dx + scaled_pdf * (dx - dmu - z * dsigma)
  return value.astype(x.dtype), jnp.broadcast_to(tangent, value.shape).astype(x.dtype)


def _gaussian_args(x: ArrayLike, mu: ArrayLike, sigma: ArrayLike) -> tuple[Array, Array, Array]:
  """The three arguments as arrays of x's floating dtype."""
  x = _as_inexact(x)
  return x, jnp.asarray(mu, x.dtype), jnp.asarray(sigma, x.dtype)


def _gaussian_gelu_parts(x: Array, mu: Array, sigma: Array) -> tuple[Array, ...]:
  """``(value, Phi(z), x phi(z) / sigma, z)``, computed in x's compute dtype."""
  x, mu, sigma = _upcast(x), _upcast(mu), _upcast(sigma)
  z = (x - mu) / sigma
  cdf = _normal_cdf(z)
  pdf = _normal_pdf(z)
  # Where Phi or phi underflows, x may be infinite: the products are 0, not inf * 0.
  value = jnp.where(cdf == 0, 0, x * cdf)
  scaled_pdf = jnp.where(pdf == 0, 0, x * pdf / sigma)
  z_c = jnp.clip(z, -_NORMAL_CLAMP[z.dtype], _NORMAL_CLAMP[z.dtype])
  return value, cdf, scaled_pdf, z_c


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
  return jax.nn.relu(x)


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
  x = _as_inexact(x)
  x_c, alpha_c = _upcast(x), _upcast(jnp.asarray(alpha, x.dtype))
  return jnp.where(x_c > 0, x_c, alpha_c * jnp.expm1(jnp.minimum(x_c, 0))).astype(x.dtype)


# Closed-form partials; expm1 of min(x, 0) keeps the untaken branch from overflowing, which
# would poison the second derivative through jnp.where.
@elu.defjvp
def _elu_jvp(primals, tangents):
  x = _as_inexact(primals[0])
  x_c = _upcast(x)
  alpha_c = _upcast(jnp.asarray(primals[1], x.dtype))
  dx, dalpha = (_upcast(jnp.asarray(t, x.dtype)) for t in tangents)
  em1 = jnp.expm1(jnp.minimum(x_c, 0))
  positive = x_c > 0
  value = jnp.where(positive, x_c, alpha_c * em1)
  tangent = jnp.where(positive, dx, alpha_c * (em1 + 1) * dx + em1 * dalpha)
  return value.astype(x.dtype), tangent.astype(x.dtype)


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
  x = _as_inexact(x)
  if not train:
    return gelu(x)
  if key is None:
    raise ValueError("soi_map(train=True) draws a random mask and needs a PRNG key; got None.")
  x_c = _upcast(x)
  keep = jax.random.uniform(key, x.shape, x_c.dtype) < _normal_cdf(jax.lax.stop_gradient(x_c))
  return jnp.where(keep, x, jnp.zeros_like(x))


class LearnableGELU(nn.Module):
  r"""GELU with a learned gate: ``gaussian_gelu(x, mu, sigma)`` with ``mu``, ``sigma`` trained.

  ``sigma = exp(log_sigma)`` so it stays positive; both parameters are scalars or, with
  ``per_feature=True``, vectors over the last axis of the input.

  Attributes:
    per_feature: one (mu, sigma) per feature of the last axis instead of a scalar pair.
    mu_init: initial mu.
    sigma_init: initial sigma, > 0.
  """

  per_feature: bool = False
  mu_init: float = 0.0
  sigma_init: float = 1.0

  @nn.compact
  def __call__(self, x: Array) -> Array:
    if not self.sigma_init > 0:
      raise ValueError(
        f"LearnableGELU(sigma_init={self.sigma_init!r}): sigma_init must be a positive float."
      )
    shape = (x.shape[-1],) if self.per_feature else ()
    mu = self.param("mu", nn.initializers.constant(self.mu_init), shape, jnp.float32)
    log_sigma = self.param(
      "log_sigma", nn.initializers.constant(np.log(self.sigma_init)), shape, jnp.float32
    )
    return gaussian_gelu(x, mu, jnp.exp(log_sigma))


for _name, _entry in [
  ("gelu", gelu),
  ("gelu_tanh", gelu_tanh),
  ("gelu_sigmoid", gelu_sigmoid),
  ("gaussian_gelu", gaussian_gelu),
  ("silu", silu),
  ("relu", relu),
  ("elu", elu),
  ("soi_map", soi_map),
  ("learnable_gelu", LearnableGELU),
]:
  ACTIVATIONS.register(_name, _entry)


def get_activation(spec: str) -> Callable[..., Array]:
  """The activation named by ``spec``, e.g. ``"gelu"`` or ``"gaussian_gelu(mu=0.5, sigma=2.0)"``.

  Raises:
    ValueError: for an unknown name (listing the known ones) or arguments it does not take.
  """
  return ACTIVATIONS.get(spec)


def activation_names() -> list[str]:
  """The registered activation names, sorted."""
  return ACTIVATIONS.names()


@functools.cache
def _resolve(spec: str) -> tuple[str, Callable[..., Array]]:
  """``(name, entry)`` for an Activation spec; cached so a spec is parsed once."""
  return parse_name(spec)[0], get_activation(spec)


class Activation(nn.Module):
  """Applies the activation named by ``spec``: the way models use activations.

  Pure functions are applied directly; ``"learnable_gelu(...)"`` creates a
  :class:`LearnableGELU` submodule; ``"soi_map"`` draws its mask from the ``'dropout'`` rng
  stream when not deterministic and is ``x * Phi(x)`` when deterministic.

  Attributes:
    spec: an activation name with optional keyword literals, see :func:`activation_names`.
  """

  spec: str

  @nn.compact
  def __call__(self, x: Array, *, deterministic: bool) -> Array:
    name, entry = _resolve(self.spec)
    if name == "learnable_gelu":
      return entry(name="learnable_gelu")(x)
    if name == "soi_map":
      key = None if deterministic else self.make_rng("dropout")
      return entry(x, key, train=not deterministic)
    return entry(x)
