"""Tests for gelujax.activations against float64 NumPy / SciPy references."""

import doctest
import functools
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax.test_util import check_grads
from scipy import optimize, special

from gelujax import activations
from gelujax.activations import (
  clipped_gelu,
  elu,
  gated,
  gaussian_gelu,
  geglu,
  gelu,
  gelu_fast,
  gelu_sigmoid,
  gelu_tanh,
  identity,
  reglu,
  relu,
  silu,
  soi_map,
  swiglu,
)
from gelujax.linen import Activation, GatedMLP, LearnableGELU
from gelujax.specs import activation_aliases, activation_names, get_activation

F32_TINY = float(np.finfo(np.float32).smallest_normal)
HYPOTHESIS = settings(deadline=None, max_examples=25)
SHAPES = st.sampled_from([(5,), (2, 3)])


# --- float64 references: value and derivative


def ref_gelu(x):
  return x * special.ndtr(x), special.ndtr(x) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def ref_gelu_tanh(x, c=None):
  # (1 + tanh(u)) / 2 = expit(2u), without float64's own cancellation in the tail.
  c = np.sqrt(2 / np.pi) if c is None else c
  u = c * (x + 0.044715 * x**3)
  du = c * (1 + 3 * 0.044715 * x**2)
  s, s_neg = special.expit(2 * u), special.expit(-2 * u)
  return x * s, s + 2 * x * s * s_neg * du


def ref_scaled_silu(k):
  def ref(x):
    s = special.expit(k * x)
    return x * s, s + k * x * s * (1 - s)

  return ref


def ref_gaussian_gelu(x, mu, sigma):
  """Value and the partials in x, mu, sigma."""
  z = (x - mu) / sigma
  pdf = np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
  return (
    x * special.ndtr(z),
    special.ndtr(z) + x * pdf / sigma,
    -x * pdf / sigma,
    -x * z * pdf / sigma,
  )


def ref_elu(x, alpha=1.0):
  return np.where(x > 0, x, alpha * np.expm1(x)), np.where(x > 0, 1.0, alpha * np.exp(x))


def ref_relu(x):
  return np.maximum(x, 0), (x > 0).astype(np.float64)


def ref_identity(x):
  return x, np.ones_like(x)


def ref_clipped_gelu(x, lower=-10.0, upper=10.0):
  y, dy = ref_gelu(x)
  inside = (y >= lower) & (y <= upper)
  return np.clip(y, lower, upper), np.where(inside, dy, 0.0)


CASES = {
  "gelu": (gelu, ref_gelu),
  "gelu_tanh": (gelu_tanh, ref_gelu_tanh),
  "gelu_fast": (gelu_fast, lambda x: ref_gelu_tanh(x, 0.7978845608)),
  "clipped_gelu": (clipped_gelu, ref_clipped_gelu),
  "gelu_sigmoid": (gelu_sigmoid, ref_scaled_silu(1.702)),
  "silu": (silu, ref_scaled_silu(1.0)),
  "gaussian_gelu": (gaussian_gelu, lambda x: ref_gaussian_gelu(x, 0.0, 1.0)[:2]),
  "elu": (elu, ref_elu),
  "relu": (relu, ref_relu),
  "identity": (identity, ref_identity),
}
SMOOTH = ["gelu", "gelu_tanh", "gelu_fast", "gelu_sigmoid", "silu", "gaussian_gelu"]
GRID = np.concatenate([np.linspace(-12, 12, 481), [-0.7518, -1e-3, 1e-3, 20.0, -20.0]])


def ulp_error(y, ref):
  """|y - ref| in float32 ulp of ref, over the references that are normal float32 numbers."""
  ref32 = ref.astype(np.float32)
  normal = np.abs(ref) >= F32_TINY
  err = np.abs(np.asarray(y, np.float64) - ref) / np.spacing(np.abs(ref32)).astype(np.float64)
  return err[normal].max()


def value_and_grad(fn):
  return jax.jit(jax.vmap(jax.value_and_grad(fn)))


# --- values and derivatives


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_derivatives_match_float64_reference(name):
  fn, ref = CASES[name]
  x = GRID.astype(np.float32)
  y, dy = value_and_grad(fn)(x)
  ref_y, ref_dy = ref(x.astype(np.float64))
  chex.assert_trees_all_close(np.asarray(y, np.float64), ref_y, rtol=2e-6, atol=1e-7)
  chex.assert_trees_all_close(np.asarray(dy, np.float64), ref_dy, rtol=2e-6, atol=1e-7)


def test_gelu_float32_ulp_accuracy_over_whole_range():
  magnitudes = np.logspace(-38, np.log10(3e38), 20001)
  x = np.concatenate([np.linspace(-14, 14, 400001), magnitudes, -magnitudes]).astype(np.float32)
  y, dy = value_and_grad(gelu)(x)
  ref_y, ref_dy = ref_gelu(x.astype(np.float64))
  # The docstring states the measured maxima (5.8 and 4.4 ulp on the benchmark's grid).
  assert ulp_error(y, ref_y) <= 6
  assert ulp_error(dy, ref_dy) <= 5
  # Below the normal range XLA flushes to zero: never more than the smallest normal.
  assert np.all(np.abs(np.asarray(y))[np.abs(ref_y) < F32_TINY] <= F32_TINY)


def test_gelu_far_tail_and_derivative_root_are_relatively_accurate():
  # x = -10 (a tiny but normal value) and the float32 numbers around the root of GELU'.
  root = -0.7517915246935645
  x = np.float32([-10.0, -13.0, root, np.nextafter(np.float32(root), 0), np.float32(root) - 6e-8])
  y, dy = value_and_grad(gelu)(x)
  # float64 keeps these relative errors below 1e-8, even GELU' next to its root.
  ref_y, ref_dy = ref_gelu(x.astype(np.float64))
  chex.assert_trees_all_close(np.asarray(y, np.float64), ref_y, rtol=4e-7, atol=0)
  chex.assert_trees_all_close(np.asarray(dy, np.float64), ref_dy, rtol=4e-7, atol=0)


def ref_gelu_tanh_d2(x, c=None):
  """The tanh form's second derivative in closed form: with u = c(x + 0.044715x³), s = σ(2u)
  and q = s(1 - s), f = xs gives f'' = 4qu' + 4xq(1 - 2s)u'² + 2xqu''."""
  c = np.sqrt(2 / np.pi) if c is None else c
  u = c * (x + 0.044715 * x**3)
  du, d2u = c * (1 + 3 * 0.044715 * x**2), 6 * 0.044715 * c * x
  s, s_neg = special.expit(2 * u), special.expit(-2 * u)
  q = s * s_neg
  return 4 * q * du + 4 * x * q * du**2 * (s_neg - s) + 2 * x * q * d2u


def ref_gelu_d2(x):
  return np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi) * (2 - x * x)


def ref_clipped_gelu_d2(x, lower=-10.0, upper=10.0):
  y = ref_gelu(x)[0]
  return np.where((y >= lower) & (y <= upper), ref_gelu_d2(x), 0.0)


SECOND_DERIVATIVES = {
  "gelu": (gelu, ref_gelu_d2),
  "gelu_fast": (gelu_fast, lambda x: ref_gelu_tanh_d2(x, 0.7978845608)),
  "gelu_tanh": (gelu_tanh, ref_gelu_tanh_d2),
  "elu": (elu, lambda x: np.where(x > 0, 0.0, np.exp(x))),
  "elu(alpha=1.5)": (lambda x: elu(x, 1.5), lambda x: np.where(x > 0, 0.0, 1.5 * np.exp(x))),
  "clipped_gelu": (clipped_gelu, ref_clipped_gelu_d2),
  # GELU crosses -0.1 twice (near -2.4 and -0.1) and 1 near 1.2: the clip acts on both sides.
  "clipped_gelu(-0.1, 1)": (
    lambda x: clipped_gelu(x, -0.1, 1.0),
    lambda x: ref_clipped_gelu_d2(x, -0.1, 1.0),
  ),
}


@pytest.mark.parametrize("name", list(SECOND_DERIVATIVES))
def test_second_derivatives_match_float64_closed_forms(name):
  fn, ref = SECOND_DERIVATIVES[name]
  x = GRID[GRID != 0].astype(np.float32)  # elu and the clip have a kink at 0 or at a bound
  d2 = jax.vmap(jax.grad(jax.grad(fn)))(x)
  ref_d2 = ref(x.astype(np.float64))
  assert np.count_nonzero(ref_d2) > len(x) // 4
  chex.assert_trees_all_close(np.asarray(d2, np.float64), ref_d2, rtol=1e-5, atol=1e-7)


def test_tanh_forms_closed_form_second_derivative_is_the_references_slope():
  x, h = np.linspace(-6, 6, 97), 1e-5
  for c in (None, 0.7978845608):
    slope = (ref_gelu_tanh(x + h, c)[1] - ref_gelu_tanh(x - h, c)[1]) / (2 * h)
    np.testing.assert_allclose(ref_gelu_tanh_d2(x, c), slope, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["gelu_sigmoid", "silu"])
def test_second_derivatives_match_finite_differences_of_reference(name):
  fn, ref = CASES[name]
  x = np.linspace(-6, 6, 97)
  h = 1e-5
  ref_d2 = (ref(x + h)[1] - ref(x - h)[1]) / (2 * h)
  d2 = jax.vmap(jax.grad(jax.grad(fn)))(x.astype(np.float32))
  chex.assert_trees_all_close(np.asarray(d2, np.float64), ref_d2, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
  "name", ["gelu", "gelu_tanh", "gelu_fast", "gelu_sigmoid", "silu", "elu", "clipped_gelu"]
)
def test_custom_jvp_rules_pass_check_grads_to_order_two(name):
  fn = CASES[name][0]
  x = jnp.asarray([-3.1, -0.9, -0.2, 0.4, 1.3, 2.7], jnp.float32)
  check_grads(fn, (x,), order=2, modes=["fwd", "rev"], atol=2e-2, rtol=2e-2, eps=1e-2)


def test_gaussian_gelu_partials_and_check_grads():
  x = np.float32([-2.0, -0.5, 0.3, 1.7])
  mu, sigma = np.float32(0.4), np.float32(1.6)
  grads = jax.vmap(jax.grad(gaussian_gelu, argnums=(0, 1, 2)), (0, None, None))(x, mu, sigma)
  _, *ref = ref_gaussian_gelu(x.astype(np.float64), 0.4, 1.6)
  chex.assert_trees_all_close([np.asarray(g, np.float64) for g in grads], ref, rtol=1e-5, atol=1e-7)
  args = (jnp.asarray(x[1:3]), jnp.float32(0.4), jnp.float32(1.6))
  check_grads(
    jax.jit(gaussian_gelu), args, order=2, modes=["fwd", "rev"], atol=2e-2, rtol=2e-2, eps=1e-2
  )


def test_elu_alpha_is_differentiable():
  x = np.float32([-2.0, -0.5, 0.7])
  d_alpha = jax.vmap(jax.grad(elu, argnums=1), (0, None))(x, np.float32(1.5))
  chex.assert_trees_all_close(np.asarray(d_alpha), np.where(x > 0, 0.0, np.expm1(x)), rtol=1e-6)
  check_grads(elu, (jnp.asarray(x), jnp.float32(1.5)), order=2, modes=["fwd", "rev"], eps=1e-2,
              atol=2e-2, rtol=2e-2)  # fmt: skip


# --- JAX's own idioms: Python numbers, jax.jvp, jax.test_util.check_grads


@pytest.mark.parametrize("name", list(CASES))
def test_python_floats_work_with_jvp_grad_and_vmap(name):
  fn, ref = CASES[name]
  (y, dy), (ref_y, ref_dy) = jax.jvp(fn, (1.25,), (1.0,)), ref(np.float64(1.25))
  assert y.dtype == dy.dtype == jnp.float32
  chex.assert_trees_all_close((np.float64(y), np.float64(dy)), (ref_y, ref_dy), rtol=2e-6)
  y, dy = jax.jvp(fn, (-0.5,), (2.0,))  # the tangent scales the derivative
  chex.assert_trees_all_close(np.float64(dy), 2 * ref(np.float64(-0.5))[1], rtol=2e-6)
  chex.assert_trees_all_close(np.float64(jax.grad(fn)(0.75)), ref(np.float64(0.75))[1], rtol=2e-6)
  chex.assert_trees_all_close(np.float64(jax.jacfwd(fn)(0.75)), ref(np.float64(0.75))[1], rtol=2e-6)
  chex.assert_trees_all_close(
    np.asarray(jax.vmap(jax.grad(fn))(jnp.float32([-1.0, 2.0])), np.float64),
    ref(np.float64([-1.0, 2.0]))[1],
    rtol=2e-6,
  )


# elu has a kink at 0, within check_grads' finite-difference step of 1e-8.
SCALAR_CASES = [
  (name, x)
  for name in [*SMOOTH, "clipped_gelu", "elu"]
  for x in [1e-8, -2.5, 0.7]
  if not (name == "elu" and x == 1e-8)
]


@pytest.mark.parametrize(("name", "x"), SCALAR_CASES)
def test_check_grads_to_order_two_at_python_floats(name, x):
  check_grads(CASES[name][0], (x,), order=2)  # JAX's default tolerances and step, float32
  with jax.enable_x64(True):
    check_grads(CASES[name][0], (x,), order=2)
    assert CASES[name][0](x).dtype == jnp.float64


@pytest.mark.parametrize("name", [*CASES, "soi_map"])
def test_integers_and_bools_become_floats_as_in_jax_nn(name):
  fn = CASES[name][0] if name in CASES else lambda v: soi_map(v, None, train=False)
  ints = jnp.arange(-3, 4)
  y = fn(ints)
  if name == "relu":  # jax.nn.relu keeps integers
    assert y.dtype == jnp.int32 and y.dtype == jax.nn.relu(ints).dtype
    chex.assert_trees_all_equal(y, jnp.int32([0, 0, 0, 0, 1, 2, 3]))
    return
  assert y.dtype == jnp.float32 == jax.nn.gelu(ints).dtype
  chex.assert_trees_all_equal(y, fn(ints.astype(jnp.float32)))
  chex.assert_trees_all_equal(fn(2), fn(2.0))
  chex.assert_trees_all_equal(fn(jnp.bool_([False, True])), fn(jnp.float32([0.0, 1.0])))
  # jax.jvp of an integer primal takes a float0 tangent, and gives a zero tangent.
  y, dy = jax.jvp(fn, (ints,), (np.zeros(ints.shape, jax.dtypes.float0),))
  chex.assert_trees_all_equal((y, dy), (fn(ints.astype(jnp.float32)), jnp.zeros(7, jnp.float32)))


GATED = {"geglu": geglu, "swiglu": swiglu, "reglu": reglu}


@pytest.mark.parametrize("name", [*CASES, "soi_map", *GATED])
def test_complex_input_is_refused_in_one_sentence(name):
  fn = {**{k: v[0] for k, v in CASES.items()}, **GATED}.get(
    name, lambda v: soi_map(v, None, train=False)
  )
  # One sentence; JAX adds a note on its traceback, on the next line, when raised inside jit.
  message = re.escape(
    f"{name} got a complex64 input; it takes real numbers: a floating array, or integers and "
    "bools, which become the default float dtype as in jax.nn."
  )
  message = f"^{message}(\n|$)"
  with pytest.raises(TypeError, match=message):
    fn(jnp.complex64([1 + 1j, 2.0]))
  if name in SMOOTH:  # the custom_jvp rule refuses it too
    with pytest.raises(TypeError, match=message):
      jax.jvp(fn, (jnp.complex64([1j]),), (jnp.complex64([1.0]),))


# --- jax.nn.gelu's keyword: approximate

APPROX_X = np.concatenate(
  [np.linspace(-12, 12, 24001), np.logspace(-30, 4, 341), -np.logspace(-30, 4, 341)]
).astype(np.float32)


def test_approximate_keyword_is_gelu_tanh_bitwise_and_exact_by_default():
  x = jnp.asarray(APPROX_X)
  chex.assert_trees_all_equal(gelu(x, approximate=True), gelu_tanh(x))
  chex.assert_trees_all_equal(gelu(x, approximate=False), gelu(x))
  chex.assert_trees_all_equal(get_activation("gelu(approximate=True)")(x), gelu_tanh(x))
  grad = jax.vmap(jax.grad(functools.partial(gelu, approximate=True)))(x)
  chex.assert_trees_all_equal(grad, jax.vmap(jax.grad(gelu_tanh))(x))
  jitted = jax.jit(gelu, static_argnames="approximate")
  chex.assert_trees_all_equal(jitted(x, approximate=True), gelu_tanh(x))
  # The defaults differ: gelujax's is exact, jax.nn.gelu's the tanh form.
  y = np.asarray(gelu(np.float64([-1.0, 1.0])), np.float64)
  chex.assert_trees_all_close(y, ref_gelu(np.float64([-1.0, 1.0]))[0], rtol=1e-6)
  assert np.abs(y - np.asarray(jax.nn.gelu(jnp.float32([-1.0, 1.0])))).max() > 1e-4


def test_approximate_true_agrees_with_jax_nn_gelu_to_a_few_ulp_not_bitwise():
  x = jnp.asarray(APPROX_X)
  ours = np.asarray(gelu(x, approximate=True), np.float64)
  theirs = np.asarray(jax.nn.gelu(x), np.float64)  # jax.nn.gelu's default: approximate=True
  # Not the same float32 operations (ours: x sigmoid(2u); jax: x (1 + tanh u) / 2), so not
  # bitwise: within 3 float32 ulp of x (measured: 3.0 at x = 1.76; 9.5e-7 over |x| <= 12).
  assert not np.array_equal(ours, theirs)
  ulp = np.spacing(np.abs(APPROX_X)).astype(np.float64)
  assert np.all(np.abs(ours - theirs) <= 3 * ulp + 1e-37)
  assert np.abs(ours - theirs)[np.abs(APPROX_X) <= 12].max() <= 1e-6
  with jax.enable_x64(True):
    x64 = jnp.asarray(np.linspace(-12, 12, 24001))
    chex.assert_trees_all_close(gelu(x64, approximate=True), jax.nn.gelu(x64), rtol=0, atol=1e-14)


def test_approximate_must_be_a_python_bool():
  with pytest.raises(
    TypeError, match=r"gelu\(approximate='yes'\): approximate must be a Python bool"
  ):
    gelu(1.0, approximate="yes")
  with pytest.raises(TypeError, match="make it a static argument"):
    jax.jit(gelu)(jnp.ones(2), True)


# --- dtypes and non-finite inputs


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("name", [*SMOOTH, "elu", "clipped_gelu"])
def test_low_precision_is_computed_in_float32_and_rounded_once(name, dtype):
  fn, ref = CASES[name]
  x = jnp.asarray(GRID, dtype)
  y = fn(x)
  assert y.dtype == dtype
  ref_y = ref(np.asarray(x, np.float64))[0]
  # One rounding of a float32-accurate result: within one ulp of the dtype of the reference.
  info = jnp.finfo(dtype)
  spacing = np.abs(np.asarray(jnp.asarray(ref_y, dtype), np.float64)) * 2.0**-info.nmant
  # Subnormals have a fixed spacing, and XLA flushes subnormal float32 intermediates (the
  # sigmoid forms lose results below ~1e-37).
  atol = max(float(info.smallest_subnormal), 1e-36)
  assert np.all(np.abs(np.asarray(y, np.float64) - ref_y) <= spacing + atol)
  chex.assert_trees_all_equal(y, fn(x.astype(jnp.float32)).astype(dtype))
  assert jax.grad(lambda v: fn(v).astype(jnp.float32).sum())(x).dtype == dtype


def all_finite(dtype):
  """Every finite value of a 16-bit dtype, or a spread of float32 values incl. the extremes."""
  if np.dtype(dtype).itemsize == 2:
    bits = np.arange(2**16, dtype=np.uint16).view(dtype)
    return bits[np.isfinite(bits.astype(np.float32))]
  rng = np.random.default_rng(0)
  bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
  info = np.finfo(np.float32)
  extremes = np.float32([info.max, -info.max, info.tiny, -info.tiny, 1e-45, -1e-45, 0.0])
  return np.concatenate([bits[np.isfinite(bits)], extremes])


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
@pytest.mark.parametrize("name", [*SMOOTH, "elu", "relu", "clipped_gelu"])
def test_no_overflow_or_nan_for_any_finite_input(name, dtype):
  fn = CASES[name][0]
  x = jnp.asarray(all_finite(dtype))
  y, dy = value_and_grad(lambda v: fn(v).astype(jnp.float32))(x)
  assert np.all(np.isfinite(np.asarray(y, np.float32)))
  assert np.all(np.isfinite(np.asarray(dy, np.float32)))


@pytest.mark.parametrize("name", SMOOTH)
def test_infinities_and_nan(name):
  fn = CASES[name][0]
  x = jnp.asarray([np.inf, -np.inf, np.nan], jnp.float32)
  y, dy = value_and_grad(fn)(x)
  chex.assert_trees_all_equal(np.asarray(y)[:2], np.float32([np.inf, 0.0]))
  chex.assert_trees_all_equal(np.asarray(dy)[:2], np.float32([1.0, 0.0]))
  assert np.isnan(np.asarray(y)[2]) and np.isnan(np.asarray(dy)[2])


# --- properties

floats32 = st.floats(-30, 30, width=32)


@HYPOTHESIS
@given(hnp.arrays(np.float32, SHAPES, elements=floats32))
def test_gelu_odd_part_is_identity(x):
  diff = np.asarray(gelu(x), np.float64) - np.asarray(gelu(-x), np.float64)
  chex.assert_trees_all_close(diff, x.astype(np.float64), rtol=3e-7, atol=1e-7)


@HYPOTHESIS
@given(hnp.arrays(np.float32, SHAPES, elements=floats32))
def test_gelu_is_above_its_global_minimum(x):
  # The minimum, at the root of GELU' (float64): -0.16997120...
  root = optimize.brentq(lambda v: ref_gelu(v)[1], -1.0, -0.5, xtol=1e-15)
  assert np.all(np.asarray(gelu(x)) >= ref_gelu(root)[0] * (1 + 1e-6))


@HYPOTHESIS
@given(hnp.arrays(np.float32, SHAPES, elements=floats32), st.sampled_from([1e-2, 1e-4, 1e-8]))
def test_gaussian_gelu_tends_to_relu_as_sigma_vanishes(x, sigma):
  # |x Phi(x / sigma) - relu(x)| = sigma |t| Phi(-|t|) <= 0.17 sigma.
  err = np.abs(np.asarray(gaussian_gelu(x, 0.0, sigma), np.float64) - np.maximum(x, 0))
  assert np.all(err <= 0.17 * sigma + 4e-7 * np.abs(x))


@HYPOTHESIS
@given(hnp.arrays(np.float32, SHAPES, elements=floats32))
def test_approximations_stay_within_their_known_error(x):
  exact = ref_gelu(x.astype(np.float64))[0]
  assert np.all(np.abs(np.asarray(gelu_tanh(x), np.float64) - exact) <= 5e-4)  # max 4.7e-4
  assert np.all(np.abs(np.asarray(gelu_sigmoid(x), np.float64) - exact) <= 2.1e-2)  # max 2.03e-2


# Without subnormal inputs: XLA's CPU kernels over arrays treat a subnormal as zero, a scalar's
# eager derivative does not (relu'(1e-45) is 1 eagerly and 0 under vmap), whatever gelujax does.
normal_floats32 = st.floats(-30, 30, width=32, allow_subnormal=False)


@settings(deadline=None, max_examples=10)
@given(hnp.arrays(np.float32, SHAPES, elements=normal_floats32), st.sampled_from(list(CASES)))
def test_jit_vmap_and_grad_agree_with_eager(x, name):
  fn = CASES[name][0]
  chex.assert_trees_all_close(jax.jit(fn)(x), fn(x), rtol=1e-6, atol=1e-30)
  chex.assert_trees_all_close(jax.vmap(fn)(x), fn(x), rtol=1e-6, atol=1e-30)
  scalar = jax.grad(fn)
  eager = np.array([scalar(v) for v in x.reshape(-1)]).reshape(x.shape)
  chex.assert_trees_all_close(jax.vmap(jax.grad(fn))(x.reshape(-1)).reshape(x.shape), eager,
                              rtol=1e-6, atol=1e-30)  # fmt: skip


# The jax.monitoring event JAX records each time it traces a jitted function to a jaxpr: what
# chex.assert_max_traces counts (each run of the function's Python body), for any function.
JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


def traces_per_call(calls) -> list[list[str]]:
  """The names of the functions JAX traces during each of ``calls``."""
  traced: list[str] = []

  def listen(event, duration, **kwargs):
    del duration
    if event == JAXPR_TRACE_EVENT:
      traced.append(kwargs.get("fun_name", "?"))

  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    counts = []
    for call in calls:
      before = len(traced)
      call()
      counts.append(traced[before:])
    return counts
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


def assert_traced_once(apply) -> None:
  """``apply(x, scale)`` traces nothing after its first call, whatever the values (scale also
  moves an activation's own arguments), called directly or inside a new jitted function."""
  scales = (0.5, 1.0, 2.0, 3.0)
  x = jnp.linspace(-3, 3, 7, dtype=jnp.float32)
  direct = traces_per_call([functools.partial(apply, x * s, s) for s in scales])
  assert direct[1:] == [[]] * (len(scales) - 1), direct

  def inside_a_new_jit(scale):
    def outer(x):
      return apply(x, scale)

    jax.jit(outer)(x * scale)

  jitted = traces_per_call([functools.partial(inside_a_new_jit, s) for s in scales])
  assert jitted[1:] == [["outer"]] * (len(scales) - 1), jitted


RETRACE_CASES = {
  **{name: lambda x, s, fn=fn: fn(x) for name, (fn, _) in CASES.items()},
  "gaussian_gelu(mu, sigma)": lambda x, s: gaussian_gelu(x, s / 4, s + 1.0),
  "elu(alpha)": lambda x, s: elu(x, s),
  "clipped_gelu(lower, upper)": lambda x, s: clipped_gelu(x, -s, s + 1.0),
  "grad of gelu": lambda x, s: jax.grad(lambda v: gelu(v).sum())(x),
}  # (learnable_gelu is gaussian_gelu; Flax traces each parameter's initialiser on every apply.)


@pytest.mark.parametrize("name", list(RETRACE_CASES))
def test_repeated_calls_do_not_retrace(name):
  assert_traced_once(RETRACE_CASES[name])


def test_the_retrace_check_fails_for_an_activation_that_jits_on_every_call():
  def rejitting(x, scale):
    del scale
    return jax.jit(lambda v: v * jax.nn.sigmoid(v))(x)  # a new function each call

  with pytest.raises(AssertionError, match="lambda"):
    assert_traced_once(rejitting)


# --- soi_map


def test_soi_map_mask_frequency_is_phi_and_eval_is_gelu():
  x = jnp.repeat(jnp.float32([-1.0, 0.5, 2.0]), 20000)
  y = np.asarray(soi_map(x, jax.random.key(0), train=True)).reshape(3, -1)
  kept = y != 0
  assert np.all(y[kept] == np.repeat(np.float32([-1.0, 0.5, 2.0]), 20000).reshape(3, -1)[kept])
  # Binomial standard error <= 0.0036; allow 4 of them.
  chex.assert_trees_all_close(kept.mean(1), special.ndtr([-1.0, 0.5, 2.0]), atol=0.015)
  chex.assert_trees_all_close(
    np.asarray(soi_map(x[:3], None, train=False), np.float64),
    ref_gelu(np.float64([-1.0, -1.0, -1.0]))[0],
    rtol=1e-6,
  )
  with pytest.raises(ValueError, match="PRNG key"):
    soi_map(x, None, train=True)


# --- registry and modules


def test_registry_resolves_names_and_arguments():
  assert get_activation("gelu") is gelu
  fn = get_activation("gaussian_gelu(mu=0.5, sigma=2.0)")
  x = np.float32([-1.0, 0.0, 2.5])
  chex.assert_trees_all_close(
    np.asarray(fn(x), np.float64), ref_gaussian_gelu(x.astype(np.float64), 0.5, 2.0)[0], rtol=1e-6
  )
  expected = ["clipped_gelu", "elu", "gaussian_gelu", "gelu", "gelu_fast", "gelu_sigmoid"]
  assert activation_names() == [
    *expected, "gelu_tanh", "identity", "learnable_gelu", "relu", "silu", "soi_map"
  ]  # fmt: skip
  with pytest.raises(ValueError, match="gelu_tanh"):
    get_activation("swishh")
  with pytest.raises(ValueError, match="Bad arguments"):
    get_activation("gelu(mu=1.0)")


@pytest.mark.parametrize("per_feature", [False, True])
def test_learnable_gelu_parameters_and_gradients(per_feature):
  module = LearnableGELU(per_feature=per_feature, mu_init=0.2, sigma_init=1.5)
  x = jnp.asarray(np.linspace(-3, 3, 12).reshape(4, 3), jnp.float32)
  params = module.init(jax.random.key(0), x)
  shape = (3,) if per_feature else ()
  chex.assert_shape([params["params"]["mu"], params["params"]["log_sigma"]], shape)
  x64 = np.asarray(x, np.float64)
  value, _, d_mu, d_sigma = ref_gaussian_gelu(x64, 0.2, 1.5)
  chex.assert_trees_all_close(np.asarray(module.apply(params, x), np.float64), value, rtol=1e-6)
  grads = jax.grad(lambda p: module.apply(p, x).sum())(params)["params"]
  axis = 0 if per_feature else None
  chex.assert_trees_all_close(np.asarray(grads["mu"]), d_mu.sum(axis), rtol=1e-5)
  # sigma = exp(log_sigma): d/d log_sigma = sigma * d/d sigma.
  chex.assert_trees_all_close(np.asarray(grads["log_sigma"]), 1.5 * d_sigma.sum(axis), rtol=1e-5)
  with pytest.raises(ValueError, match="sigma_init"):
    LearnableGELU(sigma_init=0.0).init(jax.random.key(0), x)


def test_activation_module_applies_specs():
  x = jnp.asarray(np.linspace(-2, 2, 8).reshape(2, 4), jnp.float32)
  x64 = np.asarray(x, np.float64)
  out = Activation("gaussian_gelu(sigma=0.5)").apply({}, x, deterministic=True)
  chex.assert_trees_all_close(np.asarray(out, np.float64), ref_gaussian_gelu(x64, 0, 0.5)[0],
                              rtol=1e-6)  # fmt: skip
  learnable = Activation("learnable_gelu(per_feature=True)")
  variables = learnable.init(jax.random.key(0), x, deterministic=True)
  chex.assert_shape(variables["params"]["learnable_gelu"]["mu"], (4,))
  soi = Activation("soi_map")
  chex.assert_trees_all_close(
    np.asarray(soi.apply({}, x, deterministic=True), np.float64), ref_gelu(x64)[0], rtol=1e-6
  )
  y = soi.apply({}, x, deterministic=False, rngs={"dropout": jax.random.key(1)})
  assert np.all((np.asarray(y) == 0) | (np.asarray(y) == np.asarray(x)))
  with pytest.raises(ValueError, match="learnable_gelu"):
    Activation("gelux").apply({}, x, deterministic=True)


def test_activation_module_takes_deterministic_as_linen_dropout_does():
  x = jnp.asarray(np.linspace(-2, 2, 8).reshape(2, 4), jnp.float32)
  gelu_x = ref_gelu(np.asarray(x, np.float64))[0]
  # A pure function needs no deterministic at all (before, it was a required keyword).
  chex.assert_trees_all_close(np.asarray(Activation("gelu").apply({}, x), np.float64), gelu_x,
                              rtol=2e-6, atol=1e-7)  # fmt: skip
  variables = Activation("learnable_gelu").init(jax.random.key(0), x)
  chex.assert_shape(variables["params"]["learnable_gelu"]["mu"], ())
  # soi_map does: as a field or in the call, not both, and never neither.
  with pytest.raises(ValueError, match=r"Activation\('soi_map'\) draws a random mask unless "
                     r"deterministic; pass deterministic=True or False"):  # fmt: skip
    Activation("soi_map").apply({}, x)
  chex.assert_trees_all_close(
    np.asarray(Activation("soi_map", deterministic=True).apply({}, x), np.float64),
    gelu_x,
    rtol=2e-6,
    atol=1e-7,
  )
  y = np.asarray(
    Activation("soi_map", deterministic=False).apply({}, x, rngs={"dropout": jax.random.key(1)})
  )
  assert np.all((y == 0) | (y == np.asarray(x))) and 0 < np.count_nonzero(y) < y.size
  with pytest.raises(ValueError, match="both as a field and in the call; pass it once"):
    Activation("gelu", deterministic=True).apply({}, x, deterministic=True)


def test_learnable_gelu_dtype_and_param_dtype():
  x = jnp.asarray(np.linspace(-3, 3, 12).reshape(4, 3), jnp.float32)
  value = ref_gaussian_gelu(np.asarray(x, np.float64), 0.0, 1.0)[0]
  module = LearnableGELU(per_feature=True, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
  params = module.init(jax.random.key(0), x)
  assert params["params"]["mu"].dtype == params["params"]["log_sigma"].dtype == jnp.bfloat16
  out = module.apply(params, x)  # float32 input, computed in bfloat16
  assert out.dtype == jnp.bfloat16
  # bfloat16 keeps 8 significant bits: within 2^-7 relative, after rounding the input once.
  chex.assert_trees_all_close(np.asarray(out, np.float64), value, rtol=2**-7, atol=1e-3)
  default = LearnableGELU()
  params = default.init(jax.random.key(0), x)
  assert params["params"]["mu"].dtype == jnp.float32
  assert default.apply(params, x.astype(jnp.bfloat16)).dtype == jnp.bfloat16
  assert default.apply(params, jnp.int32([1, 2])).dtype == jnp.float32  # as gelu(int)


# --- gated linear units (Shazeer 2020): value first, gate second


def ref_gated(x, ref):
  """``(value * f(gate), f(gate), value * f'(gate))`` in float64: the unit, and the parts of its
  derivative in the value and in the gate."""
  half = x.shape[-1] // 2
  value, gate = x[..., :half], x[..., half:]
  f, df = ref(gate)
  return value * f, f, value * df


GATED_CASES = {
  "geglu": (geglu, ref_gelu),
  "geglu(approximate=True)": (functools.partial(geglu, approximate=True), ref_gelu_tanh),
  "swiglu": (swiglu, ref_scaled_silu(1.0)),
  "reglu": (reglu, ref_relu),
  "gated(x, gelu_sigmoid)": (lambda x: gated(x, gelu_sigmoid), ref_scaled_silu(1.702)),
}


@pytest.mark.parametrize("name", list(GATED_CASES))
def test_gated_units_values_and_gradients_match_float64_reference(name):
  fn, ref = GATED_CASES[name]
  rng = np.random.default_rng(0)
  x = (2 * rng.normal(size=(5, 3, 8))).astype(np.float32)
  cotangent = rng.normal(size=(5, 3, 4)).astype(np.float32)
  y = fn(x)
  dx = jax.grad(lambda v: (fn(v) * cotangent).sum())(x)
  ref_y, f, v_df = ref_gated(x.astype(np.float64), ref)
  ref_dx = np.concatenate([cotangent * f, cotangent * v_df], axis=-1)
  assert y.shape == (5, 3, 4) and y.dtype == jnp.float32
  chex.assert_trees_all_close(np.asarray(y, np.float64), ref_y, rtol=2e-6, atol=1e-6)
  chex.assert_trees_all_close(np.asarray(dx, np.float64), ref_dx, rtol=2e-6, atol=1e-6)


def test_gated_units_split_value_first_then_gate_by_hand():
  # geglu([a, b]) = a gelu(b): 2 gelu(1) = 1.68268949..., 1 gelu(2) = 1.95449973...
  y = np.asarray(geglu(jnp.float32([[2.0, 1.0], [1.0, 2.0]])), np.float64)
  chex.assert_trees_all_close(y, np.float64([[1.6826894921370859], [1.9544997361036416]]),
                              rtol=1e-6)  # fmt: skip
  # swiglu([2, 1]) = 2 silu(1) = 2 / (1 + e^-1); reglu([2, -1 | 3, 0.5]) = [2 * 3, -1 * 0.5].
  chex.assert_trees_all_close(float(swiglu(jnp.float32([2.0, 1.0]))[0]), 2 / (1 + np.exp(-1)),
                              rtol=1e-6)  # fmt: skip
  chex.assert_trees_all_equal(reglu(jnp.float32([2.0, -1.0, 3.0, 0.5])), jnp.float32([6.0, -0.5]))
  # jax.nn.glu's convention (value first, sigmoid of the second half): gated with a sigmoid is it.
  x = np.random.default_rng(1).normal(size=(3, 10)).astype(np.float32)
  chex.assert_trees_all_equal(gated(x, jax.nn.sigmoid), jax.nn.glu(x))


@pytest.mark.parametrize("name", ["geglu", "swiglu", "reglu"])
def test_gated_units_refuse_an_odd_last_axis(name):
  fn = GATED_CASES[name][0]
  message = (
    rf"^{name} splits the input's last axis into two halves \(value, then gate\), so it must "
    r"have an even size; got shape \(2, 5\)"
  )
  with pytest.raises(ValueError, match=message):
    fn(jnp.ones((2, 5)))
  with pytest.raises(ValueError, match=r"got shape \(\)"):
    fn(1.0)
  with pytest.raises(ValueError, match=r"^gated splits .* got shape \(3,\)"):
    gated(jnp.ones(3), jax.nn.sigmoid)


@pytest.mark.parametrize("name", ["geglu", "geglu(approximate=True)", "swiglu"])
def test_gated_units_pass_check_grads_to_order_two_in_float64(name):
  x = np.random.default_rng(2).normal(size=(3, 6))
  with jax.enable_x64(True):
    check_grads(GATED_CASES[name][0], (jnp.asarray(x),), order=2)


def test_gated_units_keep_low_precision_and_promote_integers():
  x = jnp.asarray(np.linspace(-3, 3, 8), jnp.bfloat16)
  for fn in (geglu, swiglu, reglu):
    assert fn(x).dtype == jnp.bfloat16
    assert fn(jnp.arange(4)).dtype == jnp.float32


# --- GatedMLP (Linen): the block against a float64 reference, value and gradients


def ref_gated_mlp(params, x, cotangent, ref):
  """GatedMLP in float64: its output, and the gradients of ``sum(cotangent * output)`` in its
  parameters and in ``x``, backpropagated by hand (``ref(z) = (f(z), f'(z))`` the gate's)."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  w, b = p["hidden"]["kernel"], p["hidden"]["bias"]
  w_out, b_out = p["out"]["kernel"], p["out"]["bias"]
  z = x @ w + b
  h, f, v_df = ref_gated(z, ref)
  out = h @ w_out + b_out
  d_h = cotangent @ w_out.T
  d_z = np.concatenate([d_h * f, d_h * v_df], axis=-1)
  grads = {
    "hidden": {"kernel": x.T @ d_z, "bias": d_z.sum(0)},
    "out": {"kernel": h.T @ cotangent, "bias": cotangent.sum(0)},
  }
  return out, grads, d_z @ w.T


def gated_mlp_data(num_inputs: int = 4, num_outputs: int = 3):
  rng = np.random.default_rng(3)
  x = rng.normal(size=(8, num_inputs)).astype(np.float32)
  return x, rng.normal(size=(8, num_outputs)).astype(np.float32)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "relu"])
def test_gated_mlp_values_and_gradients_match_float64_reference(name):
  x, cotangent = gated_mlp_data()
  module = GatedMLP(5, out_features=3, activation=name)
  params = module.init(jax.random.key(0), x)["params"]
  assert jax.tree.map(np.shape, params) == {
    "hidden": {"kernel": (4, 10), "bias": (10,)},
    "out": {"kernel": (5, 3), "bias": (3,)},
  }
  # Non-zero biases, so that a bias in the wrong half or a missing one cannot hide.
  leaves, tree = jax.tree.flatten(params)
  rng = np.random.default_rng(4)
  params = jax.tree.unflatten(tree, [a + 0.3 * rng.normal(size=a.shape) for a in leaves])
  params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)

  def loss(p, v):
    return (module.apply({"params": p}, v) * cotangent).sum()

  out = module.apply({"params": params}, x)
  grads, d_x = jax.grad(loss, argnums=(0, 1))(params, x)
  ref_out, ref_grads, ref_dx = ref_gated_mlp(
    params, x.astype(np.float64), cotangent, CASES[name][1]
  )
  chex.assert_trees_all_close(np.asarray(out, np.float64), ref_out, rtol=1e-5, atol=1e-5)
  chex.assert_trees_all_close(jax.tree.map(np.float64, grads), ref_grads, rtol=1e-5, atol=1e-5)
  chex.assert_trees_all_close(np.asarray(d_x, np.float64), ref_dx, rtol=1e-5, atol=1e-5)


def test_gated_mlp_output_width_gates_and_determinism():
  x, _ = gated_mlp_data()
  module = GatedMLP(6)  # out_features: the input's width, as a transformer's block
  params = module.init(jax.random.key(0), x)
  assert module.apply(params, x).shape == (8, 4)
  learnable = GatedMLP(6, activation="learnable_gelu(per_feature=True)")
  variables = learnable.init(jax.random.key(0), x)
  chex.assert_shape(variables["params"]["gate"]["learnable_gelu"]["mu"], (6,))
  soi = GatedMLP(6, activation="soi_map")
  with pytest.raises(ValueError, match=r"Activation\('soi_map'\) draws a random mask unless"):
    soi.apply(params, x)
  chex.assert_trees_all_equal(soi.apply(params, x, deterministic=True), module.apply(params, x))
  masked = soi.apply(params, x, deterministic=False, rngs={"dropout": jax.random.key(2)})
  assert np.abs(np.asarray(masked) - np.asarray(module.apply(params, x))).max() > 1e-3
  assert GatedMLP(6, use_bias=False).init(jax.random.key(0), x)["params"]["out"].keys() == {
    "kernel"
  }


def test_docstring_examples_run():
  """Every module of the package (doctest finds a function's examples in the module that
  defines it, not in the ``__init__`` that re-exports it)."""
  attempted = 0
  for info in pkgutil.iter_modules(activations.__path__, "gelujax.activations."):
    results = doctest.testmod(
      importlib.import_module(info.name),
      optionflags=doctest.NORMALIZE_WHITESPACE,
      extraglobs={"jnp": jnp},
    )
    assert results.failed == 0, info.name
    attempted += results.attempted
  assert attempted >= 10


# --- other frameworks' names

# Each framework's formula as that framework writes it (sources: PyTorch's and TensorFlow's
# documentation of gelu, jax.nn.gelu, transformers/activations.py, timm/layers/activations.py),
# in NumPy float64. erf, erfc and tanh forms are written out, not taken from the references
# above, so that a mapping to the wrong gelujax function cannot pass.
SQRT_2_OVER_PI = np.sqrt(2 / np.pi)


def erf_form(x):
  return x * 0.5 * (1.0 + special.erf(x / np.sqrt(2.0)))


def erfc_form(x):
  return x * special.erfc(-x * np.sqrt(0.5)) / 2


def tanh_form(x):
  return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))


def hf_gelu_fast(x):
  return 0.5 * x * (1.0 + np.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def quick_gelu(x):
  return x * special.expit(1.702 * x)


def hf_gelu_10(x):
  return np.clip(erf_form(x), -10, 10)


FRAMEWORK_FORMULAS = {
  "torch:gelu": erf_form,
  "torch:gelu(approximate='none')": erf_form,
  "torch:gelu(approximate='tanh')": tanh_form,
  "jax:gelu": tanh_form,
  "jax:gelu(approximate=True)": tanh_form,
  "jax:gelu(approximate=False)": erfc_form,
  "flax:gelu": tanh_form,
  "flax:gelu(approximate=True)": tanh_form,
  "flax:gelu(approximate=False)": erfc_form,
  "tf:gelu": erf_form,
  "tf:gelu(approximate=False)": erf_form,
  "tf:gelu(approximate=True)": tanh_form,
  "keras:gelu": erf_form,
  "keras:gelu(approximate=False)": erf_form,
  "keras:gelu(approximate=True)": tanh_form,
  "transformers:gelu": erf_form,
  "transformers:gelu_python": erf_form,
  "transformers:gelu_new": tanh_form,
  "transformers:gelu_pytorch_tanh": tanh_form,
  "transformers:gelu_python_tanh": tanh_form,
  "transformers:gelu_accurate": tanh_form,
  "transformers:gelu_fast": hf_gelu_fast,
  "transformers:quick_gelu": quick_gelu,
  "transformers:gelu_10": hf_gelu_10,
  "timm:gelu": erf_form,
  "timm:gelu_tanh": tanh_form,
  "timm:quick_gelu": quick_gelu,
}
NAMES_X = np.concatenate([np.linspace(-8, 8, 1601), [-20.0, -12.5, 10.0, 10.2, 12.0, 20.0]])


def test_every_alias_has_its_frameworks_formula():
  assert sorted(activation_aliases()) == sorted(FRAMEWORK_FORMULAS)


@pytest.mark.parametrize("alias", list(FRAMEWORK_FORMULAS))
def test_alias_computes_its_frameworks_formula(alias):
  fn, formula = get_activation(alias), FRAMEWORK_FORMULAS[alias]
  expected = formula(NAMES_X)
  # float64 tells gelu_fast's truncated constant (~1e-12 here) from sqrt(2 / pi); the forms'
  # own float64 rounding (1 + erf and 1 + tanh cancel for x < 0) stays below 1e-14.
  with jax.enable_x64(True):
    y64 = np.asarray(fn(jnp.asarray(NAMES_X)))
  chex.assert_trees_all_close(y64, expected, rtol=1e-13, atol=1e-14)
  y32 = np.asarray(fn(NAMES_X.astype(np.float32)), np.float64)
  chex.assert_trees_all_close(y32, expected, rtol=2e-6, atol=1e-7)


def test_jax_aliases_agree_with_jax_nn_gelu():
  with jax.enable_x64(True):
    x = jnp.asarray(NAMES_X)
    for approximate in (True, False):
      expected = np.asarray(jax.nn.gelu(x, approximate=approximate))
      y = np.asarray(get_activation(f"jax:gelu(approximate={approximate})")(x))
      chex.assert_trees_all_close(y, expected, rtol=1e-13, atol=1e-14)
    chex.assert_trees_all_close(np.asarray(get_activation("jax:gelu")(x)),
                                np.asarray(jax.nn.gelu(x)), rtol=1e-13, atol=1e-14)  # fmt: skip


def test_alias_lookup_ignores_spelling_and_names_the_known_ones():
  assert get_activation('torch:gelu( approximate = "tanh" )') is gelu_tanh
  assert get_activation("transformers:gelu_new") is gelu_tanh
  assert get_activation("jax:gelu(approximate=False)") is gelu
  with pytest.raises(ValueError, match=r"known torch names: torch:gelu, .*approximate='tanh'"):
    get_activation("torch:gelu(approximate='tan')")
  with pytest.raises(ValueError, match=r"namespace 'pytorch'; known namespaces: flax, jax"):
    get_activation("pytorch:gelu")


def test_activation_module_takes_aliases():
  x = jnp.asarray(np.linspace(-15, 15, 8).reshape(2, 4), jnp.float32)
  x64 = np.asarray(x, np.float64)
  for alias, formula in [("transformers:gelu_10", hf_gelu_10), ("jax:gelu", tanh_form)]:
    out = Activation(alias).apply({}, x, deterministic=True)
    chex.assert_trees_all_close(np.asarray(out, np.float64), formula(x64), rtol=2e-6, atol=1e-7)


def test_clipped_gelu_rejects_inverted_bounds():
  with pytest.raises(ValueError, match=r"clipped_gelu\(lower=1.0, upper=0.0\)"):
    clipped_gelu(jnp.ones(3), lower=1.0, upper=0.0)


@pytest.mark.parametrize(
  ("spec", "problem"),
  [
    ("gaussian_gelu(sigma=0)", "sigma is a standard deviation, which must be > 0 and normal in "
     "float32 (at least 1.18e-38), not 0"),
    ("gaussian_gelu(sigma=-1)", "sigma is a standard deviation, which must be > 0 and normal in "
     "float32 (at least 1.18e-38), not -1"),
    ("gaussian_gelu(sigma=1e-40)", "sigma is a standard deviation, which must be > 0 and normal "
     "in float32 (at least 1.18e-38), not 1e-40"),
    ("gaussian_gelu(sigma=[1.0, 0.0])", "sigma is a standard deviation, which must be > 0 and "
     "normal in float32 (at least 1.18e-38), not [1.0, 0.0]"),
    ("gaussian_gelu(mu=1e999)", "mu must be finite, not inf"),
    ("gaussian_gelu(mu='a')", "mu must be a number or a list of numbers, not 'a'"),
    ("clipped_gelu(lower=5, upper=-5)", "lower 5 is above upper -5; lower must be <= upper"),
    ("clipped_gelu(upper=-20)", "lower -10.0 is above upper -20; lower must be <= upper"),
    ("clipped_gelu(lower=None)", "lower must be a number, not None"),
    ("elu(alpha=1e999)", "alpha must be finite, not inf"),
    ("gelu(approximate=1)", "approximate must be True or False, not 1"),
    ("soi_map(train=True)", "soi_map takes no arguments in a spec (its key and train come from "
     "the model), not {'train': True}"),
    ("learnable_gelu(sigma_init=0.0)", "sigma_init is the initial standard deviation, which must "
     "be > 0 and normal in float32 (at least 1.18e-38), not 0.0"),
    ("learnable_gelu(per_feature=1)", "per_feature must be True or False, not 1"),
  ],
)  # fmt: skip
def test_a_spec_whose_arguments_the_activation_cannot_take_is_refused_in_one_sentence(
  spec, problem
):
  """Refused when the spec is resolved, before any array meets it: σ = 0 ended a run in "setting
  an array element with a sequence" from the function's rule, after the workdir was made."""
  with pytest.raises(ValueError) as error:
    get_activation(spec)
  assert str(error.value) == f"Bad arguments in activation {spec!r}: {problem}."


def test_arguments_an_activation_takes_are_bound():
  for spec in [
    "gaussian_gelu(mu=-0.5, sigma=1e-3)", "gaussian_gelu(sigma=[1.0, 2.0])", "elu(alpha=-0.5)",
    "clipped_gelu(lower=-1, upper=1e999)", "clipped_gelu(lower=1.0, upper=1.0)",
    "gelu(approximate=True)", "learnable_gelu(per_feature=True, mu_init=1, sigma_init=0.5)",
  ]:  # fmt: skip
    assert isinstance(get_activation(spec), functools.partial), spec


def test_the_names_table_is_what_the_code_computes():
  path = Path(__file__).resolve().parents[1] / "scripts" / "gelu_names_table.py"
  spec = importlib.util.spec_from_file_location("gelu_names_table", path)
  table = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(table)
  page = table.PAGE.read_text()
  assert table.page_table(page) == table.render(), (
    "docs/activations.md's GELU names table is stale: run python scripts/gelu_names_table.py"
  )
  # Independent spot checks of the computed numbers: the tanh form's largest deviation from
  # x Phi(x) is 4.73e-4 and the sigmoid form's 2.03e-2 (float64 SciPy, step 1e-4).
  x = np.linspace(-20, 20, 400001)
  exact = x * special.ndtr(x)
  assert f"| {np.abs(tanh_form(x) - exact).max():.2e} |" in page
  assert f"| {np.abs(quick_gelu(x) - exact).max():.2e} |" in page
