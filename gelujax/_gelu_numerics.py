"""The numerics behind :mod:`gelujax.activations` (private: the public API is there).

Every activation is computed as a *pair* ``(f(x), f'(x))`` by one function of ``x`` in its compute
dtype; :func:`apply_pair` turns a pair into the value (rounded once to the input's dtype) and
:func:`pair_jvp` into the ``jax.custom_jvp`` rule, so each activation's value and tangent come
from the same accurate evaluation. Each pair's own derivative is right (a ``custom_jvp`` of its
own, or plain differentiable ``jnp``), so second derivatives are exact too.

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
XLA:CPU does not fuse sibling loops by default, so forward+backward reads ``x`` twice and
computes the exponential twice. What was tried to make one loop produce both (measured on an AMD
EPYC, forward+backward of 16M float32 values; figures in the commit that recorded the benchmark
report): a ``custom_vjp`` keeping only ``x`` compiles to the same two loops; an exponential
shared through memory (``jnp.exp``, which XLA materialises) is slower, the extra array costing
more than the compute it saves; XLA's multi-output fusion exists only as a process-wide flag
(``--xla_backend_extra_options=xla_cpu_use_multi_output_fusion``) that also changes every other
program; a variadic reduce over a size-2 axis does give one loop, but then GELU' is a stored
array that forward+backward writes and reads again. Fewer instructions per loop did help (the
scale and the halving folded into constants).

Results below the smallest normal float32 (``|y| < 1.2e-38``, i.e. GELU(x) for x < -13.1) are
flushed to zero, as XLA does on CPU.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

Pair = Callable[[Array], tuple[Array, Array]]

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
_EXP_NEG_HALF_COEFFS = tuple(c / 2**n for n, c in enumerate(_EXP_NEG_COEFFS))  # exp(-r / 2)
_SIGMOID_CLAMP = 128.0
_TANH_CLAMP = {np.dtype(np.float32): 12.0, np.dtype(np.float64): 26.0}
# GELU's pair evaluates m and s times 2**-24, which cancels the exponential's 2**24 scale with
# no multiplication of its own (scaling by a power of two is exact).
_MILLS_COEFFS_SCALED = tuple(c / _EXP_SCALE for c in _MILLS_COEFFS)
_ROOT_COEFFS_U_SCALED = tuple(c * _T_SCALE**k / _EXP_SCALE for k, c in enumerate(_ROOT_COEFFS))
SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))
_INV_SQRT_2PI = float(1 / np.sqrt(2 * np.pi))
# The approximations' constants (the GELU paper's, and the truncated one of Hugging Face's
# gelu_fast); gelujax/activations/gelus.py's docstrings and README table name them.
GELU_TANH_COEFF = 0.044715
GELU_FAST_SCALE = 0.7978845608
GELU_SIGMOID_SCALE = 1.702


def _compute_dtype(dtype: np.dtype) -> np.dtype:
  """The dtype an activation computes in: float32 for narrower floats, else the input's."""
  return np.dtype(np.float32) if np.dtype(dtype).itemsize < 4 else np.dtype(dtype)


def as_real(x: ArrayLike, name: str) -> Array:
  """``x`` as an array, refused if complex with a sentence naming ``name``: every formula here
  is a real function (``jax.nn.gelu`` takes complex numbers, through its tanh form only).

  Raises:
    TypeError: for a complex ``x``.
  """
  x = jnp.asarray(x)
  if jnp.issubdtype(x.dtype, jnp.complexfloating):
    raise TypeError(
      f"{name} got a {x.dtype} input; it takes real numbers: a floating array, or integers and "
      "bools, which become the default float dtype as in jax.nn."
    )
  return x


def as_inexact(x: ArrayLike, name: str) -> Array:
  """``x`` as a real floating array: integers and bools become the default float dtype, as in
  jax.nn; complex numbers are refused (:func:`as_real`)."""
  x = as_real(x, name)
  return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def upcast(x: Array) -> Array:
  """``x`` in its compute dtype (float32 for bfloat16 and float16)."""
  return x.astype(_compute_dtype(x.dtype))


def _pair_name(pair: Pair) -> str:
  """The activation a pair computes, for messages: ``gelu_and_grad`` -> ``gelu``."""
  return pair.__name__.removesuffix("_and_grad")


def apply_pair(pair: Pair, x: ArrayLike) -> Array:
  """``f(x)`` from ``pair(x) = (f(x), f'(x))``, computed in x's compute dtype, rounded once."""
  x = as_inexact(x, _pair_name(pair))
  return pair(upcast(x))[0].astype(x.dtype)


def pair_jvp(pair: Pair) -> Callable:
  """The ``jax.custom_jvp`` rule of ``x -> f(x)`` from ``pair(x) = (f(x), f'(x))``.

  The tangent ``f'(x) * t`` is computed in the compute dtype and rounded once, like the value;
  under a second differentiation JAX differentiates the pair itself, whose derivative is
  exact, so Hessians and gradient penalties are too.
  """

  def jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    x = as_inexact(x, _pair_name(pair))
    value, grad = pair(upcast(x))
    # jax.jvp hands a rule its tangents as given: a Python float for jvp(f, (1.0,), (1.0,)).
    t = jnp.asarray(t, x.dtype)
    return value.astype(x.dtype), (grad * upcast(t)).astype(x.dtype)

  return jvp


def _polyval(coeffs: tuple[float, ...], t: Array) -> Array:
  """Horner's rule with the coefficients cast to ``t``'s dtype (lowest degree first)."""
  acc = jnp.full_like(t, coeffs[-1])
  for c in coeffs[-2::-1]:
    acc = acc * t + jnp.asarray(c, t.dtype)
  return acc


def _exp_neg_half_square(a: Array) -> Array:
  """``exp(-a**2 / 2) * 2**24`` for ``0 <= a <= clamp``, without the ~a**2 ulp error of ``a * a``.

  float32: ``a = a_hi + a_lo`` with ``a_hi`` the top 12 significand bits, so
  ``a**2 = a_hi**2 + (a - a_hi) (a + a_hi)`` with an exact head, and head and tail meet inside
  the range reduction ``a**2 = 2 k ln2 + r2`` (as in :func:`_exp_neg_scaled`, with the halving
  folded into the constants and the Taylor coefficients of ``exp(-r2 / 2)``) instead of being
  rounded together: accurate to ~1 ulp for any ``a``. The ``2**24`` scale keeps the result
  normal down to GELU's own underflow, where XLA flushes subnormals to zero; callers fold it
  into their own constants. Under differentiation ``a_hi`` and ``k`` are constants and ``d/da``
  of the tail is exactly ``2 a``, so the derivative is right.
  float64 uses ``jnp.exp``.
  """
  if a.dtype != np.float32:
    return jnp.exp(-0.5 * a * a) * _EXP_SCALE
  bits = jax.lax.bitcast_convert_type(a, np.uint32) & np.uint32(0xFFFFF000)
  a_hi = jax.lax.stop_gradient(jax.lax.bitcast_convert_type(bits, np.float32))
  head, tail = a_hi * a_hi, (a - a_hi) * (a + a_hi)
  k_magic = jax.lax.stop_gradient((head + tail) * (_LOG2E / 2) + _ROUND_MAGIC)
  k_bits = jax.lax.bitcast_convert_type(k_magic, np.int32) | np.int32(0x4B400000)
  k = jax.lax.bitcast_convert_type(k_bits, np.float32) - _ROUND_MAGIC
  # 2 _LN2_HI has 16 significant bits too, so k * 2 _LN2_HI is exact.
  r2 = ((head - k * (2 * _LN2_HI)) - k * (2 * _LN2_LO)) + tail
  scale = jax.lax.bitcast_convert_type((_SCALE_BITS - k_bits) << 23, np.float32)
  return _polyval(_EXP_NEG_HALF_COEFFS, r2) * scale


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
def normal_cdf(z: Array) -> Array:
  """Phi(z), relative-accurate in both tails (for the complement 1 - Phi too)."""
  a, e = _normal_tail(z)
  lower = (e * _mills(a)) * (1 / _EXP_SCALE)
  return jnp.where(z < 0, lower, 1 - lower)


# Differentiating the tail approximation would give the derivative of the polynomial; Phi' is
# known exactly, and normal_pdf is plain jnp, so every higher derivative follows too.
normal_cdf.defjvps(lambda t, ans, z: normal_pdf(z) * t)


def normal_pdf(z: Array) -> Array:
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
def gelu_and_grad(x: Array) -> tuple[Array, Array]:
  """``(GELU(x), GELU'(x))`` for float32 or float64 ``x``, sharing the exponential."""
  a, e = _normal_tail(x)
  x_low = jnp.maximum(x, -_NORMAL_CLAMP[x.dtype])
  if x.dtype == np.float32:
    t = _t_variable(a)
    m = t * _polyval(_MILLS_COEFFS_SCALED, t)  # m(a) 2**-24: e * m is Phi(-a) itself
    # _ROOT_HI - a is exact near the root (Sterbenz), so GELU' keeps its relative accuracy
    # there; _ROOT_LO is added after the product so XLA cannot fold it into _ROOT_HI.
    # s(t) with t = 3u, u = 1 / (3 + a): a division of its own, which XLA fuses into the
    # derivative's loop, where a t shared with the value would be materialised in memory.
    u = 1 / (_T_SCALE + a)
    s = _polyval(_ROOT_COEFFS_U_SCALED, u)
    low_grad = e * ((_ROOT_HI - a) * s + _ROOT_LO * s)
    # x Phi(-a) multiplies x into the exponential before m (2**-24) so that no intermediate
    # underflows before the result does, for tiny x as for x near -13; the clamp keeps
    # -inf * 0 from giving NaN.
    lower = e * m
    value = jnp.where(x < 0, (x_low * e) * m, x * (1 - lower))
  else:
    m = _mills(a)
    low_grad = (e * (m - a * _INV_SQRT_2PI)) * (1 / _EXP_SCALE)
    lower = (e * m) * (1 / _EXP_SCALE)
    value = jnp.where(x < 0, ((x_low * m) * e) * (1 / _EXP_SCALE), x * (1 - lower))
  # GELU'(x) = step(x) - sign(x) w, exact (w is 0 at +-inf thanks to the clamp on a).
  sign = _copysign_one(x)
  grad = (0.5 + 0.5 * sign) - sign * low_grad
  return value, grad


# The pair's own derivative is (GELU', GELU'') with GELU''(x) = phi(x) (2 - x**2): this is what
# makes second derivatives of `gelu` exact rather than derivatives of the polynomial fit.
@gelu_and_grad.defjvp
def _gelu_and_grad_jvp(primals, tangents):
  (x,), (t,) = primals, tangents
  value, grad = gelu_and_grad(x)
  a, e = _normal_tail(x)
  hess = (_INV_SQRT_2PI * e * (2 - a * a)) * (1 / _EXP_SCALE)
  return (value, grad), (grad * t, hess * t)


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


def scaled_silu_and_grad(x: Array, k: float) -> tuple[Array, Array]:
  """``(x sigma(k x), d/dx)`` with +-inf mapped to (inf, 1) and (0, 0)."""
  kx = jnp.asarray(k, x.dtype) * x
  s, s_neg = _sigmoids(kx)
  x_c = jnp.clip(x, -_SIGMOID_CLAMP, _SIGMOID_CLAMP)
  value = jnp.maximum(x, -_SIGMOID_CLAMP) * s
  grad = s * (1 + jnp.asarray(k, x.dtype) * x_c * s_neg)
  return value, grad


def gelu_sigmoid_and_grad(x: Array) -> tuple[Array, Array]:
  """``(x sigma(1.702 x), d/dx)``."""
  return scaled_silu_and_grad(x, GELU_SIGMOID_SCALE)


def silu_and_grad(x: Array) -> tuple[Array, Array]:
  """``(x sigma(x), d/dx)``."""
  return scaled_silu_and_grad(x, 1.0)


def gelu_tanh_and_grad(x: Array, scale: float = SQRT_2_OVER_PI) -> tuple[Array, Array]:
  """``(x sigma(2u), d/dx)`` with ``u = scale * (x + 0.044715 x**3)``: the tanh form of GELU.

  ``(1 + tanh(u)) / 2 = sigma(2u)`` keeps relative accuracy in the negative tail, where
  ``1 + tanh(u)`` cancels; ``x`` is clamped inside ``u`` where the form is saturated, so
  ``x**3`` never overflows.
  """
  clamp = _TANH_CLAMP[x.dtype]
  x_c = jnp.clip(x, -clamp, clamp)
  c0 = jnp.asarray(scale, x.dtype)
  c1 = jnp.asarray(GELU_TANH_COEFF, x.dtype)
  two_u = 2 * c0 * x_c * (1 + c1 * x_c * x_c)
  s, s_neg = _sigmoids(two_u)
  value = jnp.maximum(x, -clamp) * s
  grad = s + 2 * c0 * x_c * s * s_neg * (1 + 3 * c1 * x_c * x_c)
  return value, grad


def gelu_fast_and_grad(x: Array) -> tuple[Array, Array]:
  """The tanh form with Hugging Face's truncated ``sqrt(2 / pi) = 0.7978845608``."""
  return gelu_tanh_and_grad(x, GELU_FAST_SCALE)


def gaussian_args(x: ArrayLike, mu: ArrayLike, sigma: ArrayLike) -> tuple[Array, Array, Array]:
  """The three arguments as arrays of x's floating dtype."""
  x = as_inexact(x, "gaussian_gelu")
  return x, jnp.asarray(mu, x.dtype), jnp.asarray(sigma, x.dtype)


def gaussian_gelu_parts(x: Array, mu: Array, sigma: Array) -> tuple[Array, ...]:
  """``(value, Phi(z), x phi(z) / sigma, z)``, computed in x's compute dtype."""
  x, mu, sigma = upcast(x), upcast(mu), upcast(sigma)
  z = (x - mu) / sigma
  cdf = normal_cdf(z)
  pdf = normal_pdf(z)
  # Where Phi or phi underflows, x may be infinite: the products are 0, not inf * 0.
  value = jnp.where(cdf == 0, 0, x * cdf)
  scaled_pdf = jnp.where(pdf == 0, 0, x * pdf / sigma)
  z_c = jnp.clip(z, -_NORMAL_CLAMP[z.dtype], _NORMAL_CLAMP[z.dtype])
  return value, cdf, scaled_pdf, z_c
