"""Tests for gelujax.nnx: the NNX modules against the Linen ones and float64 references."""

import doctest
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from scipy import special
from test_activations import (
  CASES,
  GRID,
  gated_mlp_data,
  ref_gated_mlp,
  ref_gaussian_gelu,
  ref_gelu,
)

import gelujax
from gelujax import models
from gelujax import nnx as gnnx

X_16x3 = np.linspace(-4, 4, 48).reshape(16, 3).astype(np.float32)
MU_3 = np.float32([-0.5, 0.2, 1.0])
SIGMA_3 = np.float32([0.5, 1.5, 3.0])


def test_from_gelujax_import_nnx_gives_both_modules():
  from gelujax import nnx as imported

  assert imported is gelujax.nnx
  assert issubclass(imported.Activation, nnx.Module)
  assert issubclass(imported.LearnableGELU, nnx.Module)
  assert issubclass(imported.GatedMLP, nnx.Module)


# --- values and gradients: NNX = Linen = float64 reference


@pytest.mark.parametrize("name", list(CASES))
def test_activation_matches_linen_and_the_float64_reference(name):
  x = GRID.astype(np.float32)
  module = gnnx.Activation(name)
  linen = gelujax.Activation(name)
  y, dy = jax.vmap(jax.value_and_grad(lambda v: module(v)))(x)
  y_linen, dy_linen = jax.vmap(
    jax.value_and_grad(lambda v: linen.apply({}, v, deterministic=True))
  )(x)
  chex.assert_trees_all_equal((y, dy), (y_linen, dy_linen))
  ref_y, ref_dy = CASES[name][1](x.astype(np.float64))
  chex.assert_trees_all_close(np.asarray(y, np.float64), ref_y, rtol=2e-6, atol=1e-7)
  chex.assert_trees_all_close(np.asarray(dy, np.float64), ref_dy, rtol=2e-6, atol=1e-7)


def test_activation_takes_arguments_and_aliases():
  x = X_16x3
  x64 = x.astype(np.float64)
  out = gnnx.Activation("gaussian_gelu(mu=0.5, sigma=2.0)")(x)
  chex.assert_trees_all_close(np.asarray(out, np.float64), ref_gaussian_gelu(x64, 0.5, 2.0)[0],
                              rtol=2e-6, atol=1e-7)  # fmt: skip
  quick = gnnx.Activation("transformers:quick_gelu")(x)  # x * sigmoid(1.702 x)
  chex.assert_trees_all_close(np.asarray(quick, np.float64), x64 * special.expit(1.702 * x64),
                              rtol=2e-6, atol=1e-7)  # fmt: skip


def learnable_pair(per_feature: bool):
  """The NNX and Linen modules with the same non-initial (mu, sigma), and the Linen params."""
  mu, sigma = (MU_3, SIGMA_3) if per_feature else (MU_3[2], SIGMA_3[2])
  module = gnnx.LearnableGELU(3 if per_feature else None)
  module.mu[...] = jnp.asarray(mu)
  module.log_sigma[...] = jnp.log(jnp.asarray(sigma))
  linen = gelujax.LearnableGELU(per_feature=per_feature)
  params = {"mu": jnp.asarray(mu), "log_sigma": jnp.log(jnp.asarray(sigma))}
  return module, linen, {"params": params}, np.float64(mu), np.float64(sigma)


@pytest.mark.parametrize("per_feature", [False, True])
def test_learnable_gelu_values_and_gradients_in_x_mu_sigma(per_feature):
  module, linen, variables, mu, sigma = learnable_pair(per_feature)
  x = jnp.asarray(X_16x3)
  value, d_x, d_mu, d_sigma = ref_gaussian_gelu(np.float64(X_16x3), mu, sigma)
  axis = 0 if per_feature else None

  out = module(x)
  chex.assert_trees_all_equal(out, linen.apply(variables, x))
  chex.assert_trees_all_close(np.asarray(out, np.float64), value, rtol=2e-6, atol=1e-7)

  grad_x = jax.grad(lambda v: module(v).sum())(x)
  chex.assert_trees_all_equal(grad_x, jax.grad(lambda v: linen.apply(variables, v).sum())(x))
  chex.assert_trees_all_close(np.asarray(grad_x, np.float64), d_x, rtol=2e-6, atol=1e-7)

  grads = nnx.grad(lambda m: m(x).sum())(module)
  grads_linen = jax.grad(lambda p: linen.apply(p, x).sum())(variables)["params"]
  chex.assert_trees_all_close(nnx.to_pure_dict(grads), grads_linen, rtol=1e-6, atol=0)
  chex.assert_trees_all_close(np.asarray(grads["mu"][...], np.float64), d_mu.sum(axis),
                              rtol=1e-5)  # fmt: skip
  # sigma = exp(log_sigma): d/d log_sigma = sigma * d/d sigma.
  chex.assert_trees_all_close(np.asarray(grads["log_sigma"][...], np.float64),
                              sigma * d_sigma.sum(axis), rtol=1e-5)  # fmt: skip


def test_learnable_gelu_initial_values_and_shapes_are_the_linen_modules():
  x = jnp.asarray(X_16x3)
  for per_feature, num_features in [(False, None), (True, 3)]:
    module = gnnx.LearnableGELU(num_features, mu_init=0.25, sigma_init=2.0)
    linen = gelujax.LearnableGELU(per_feature=per_feature, mu_init=0.25, sigma_init=2.0)
    chex.assert_trees_all_equal(
      nnx.to_pure_dict(nnx.state(module, nnx.Param)), linen.init(jax.random.key(0), x)["params"]
    )
  assert float(module.log_sigma[0]) == np.float32(np.log(2.0))  # a hand-computed value


def test_dtype_and_param_dtype():
  x = jnp.asarray(X_16x3)
  value = ref_gaussian_gelu(np.float64(X_16x3), 0.0, 1.0)[0]
  module = gnnx.LearnableGELU(3, param_dtype=jnp.bfloat16, dtype=jnp.bfloat16)
  assert module.mu.dtype == module.log_sigma.dtype == jnp.bfloat16
  out = module(x)  # float32 input, computed in bfloat16
  assert out.dtype == jnp.bfloat16
  # bfloat16 keeps 8 significant bits: within 2^-8 relative, after rounding the input once.
  chex.assert_trees_all_close(np.asarray(out, np.float64), value, rtol=2**-7, atol=1e-3)
  default = gnnx.LearnableGELU(3)
  assert default.mu.dtype == jnp.float32 and default(x.astype(jnp.bfloat16)).dtype == jnp.bfloat16
  act = gnnx.Activation("gelu", dtype=jnp.bfloat16)
  assert act(x).dtype == jnp.bfloat16
  learnable = gnnx.Activation("learnable_gelu", param_dtype=jnp.float16)
  assert learnable.learnable_gelu.mu.dtype == jnp.float16


@pytest.mark.parametrize("dtype", [None, jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("param_dtype", [jnp.float32, jnp.bfloat16])
def test_learnable_gelu_dtypes_compute_what_the_linen_module_does(dtype, param_dtype):
  x = jnp.asarray(X_16x3, jnp.bfloat16 if dtype is None else jnp.float32)
  module = gnnx.LearnableGELU(3, mu_init=0.3, sigma_init=1.7, dtype=dtype, param_dtype=param_dtype)
  linen = gelujax.LearnableGELU(per_feature=True, mu_init=0.3, sigma_init=1.7, dtype=dtype,
                                param_dtype=param_dtype)  # fmt: skip
  variables = linen.init(jax.random.key(0), x)
  chex.assert_trees_all_equal(nnx.to_pure_dict(nnx.state(module, nnx.Param)), variables["params"])
  chex.assert_trees_all_equal(module(x), linen.apply(variables, x))
  # bfloat16 somewhere: 8 significant bits, within 2^-7 relative of the float64 value.
  ref = ref_gaussian_gelu(np.float64(X_16x3), 0.3, 1.7)[0]
  chex.assert_trees_all_close(np.asarray(module(x), np.float64), ref, rtol=2**-6, atol=1e-2)


# --- the bridge: one to one both ways


def test_bridge_round_trip_keeps_the_parameters():
  module, linen, variables, _, _ = learnable_pair(per_feature=True)
  x = jnp.asarray(X_16x3)
  state = nnx.state(module, nnx.Param)
  # NNX -> Linen: the NNX state, as a plain dict, is the Linen module's params.
  as_linen = {"params": nnx.to_pure_dict(state)}
  chex.assert_trees_all_equal(as_linen, variables)
  chex.assert_trees_all_equal(linen.apply(as_linen, x), module(x))
  # ... and back through ToNNX: the same state, the same outputs.
  wrapped = nnx.bridge.ToNNX(linen, rngs=nnx.Rngs(0)).lazy_init(x)
  nnx.update(wrapped, state)
  chex.assert_trees_all_equal(nnx.state(wrapped, nnx.Param), state)
  chex.assert_trees_all_equal(wrapped(x), module(x))
  # ToLinen of the NNX class initialises to the Linen module's values and applies its params.
  to_linen = nnx.bridge.ToLinen(gnnx.LearnableGELU, args=(3,), kwargs={"mu_init": 0.2},
                                skip_rng=True)  # fmt: skip
  linen_init = gelujax.LearnableGELU(per_feature=True, mu_init=0.2).init(jax.random.key(0), x)
  chex.assert_trees_all_equal(to_linen.init(jax.random.key(0), x), linen_init)
  chex.assert_trees_all_equal(to_linen.apply(variables, x), linen.apply(variables, x))


def test_bridge_maps_the_activation_modules_learnable_submodule():
  spec = "learnable_gelu(per_feature=True, sigma_init=0.5)"
  x = jnp.asarray(X_16x3)
  linen_vars = gelujax.Activation(spec).init(jax.random.key(0), x, deterministic=True)
  module = gnnx.Activation(spec, num_features=3)
  chex.assert_trees_all_equal({"params": nnx.to_pure_dict(nnx.state(module, nnx.Param))},
                              linen_vars)  # fmt: skip
  wrapped = nnx.bridge.ToNNX(gelujax.Activation(spec), rngs=nnx.Rngs(0))
  wrapped = wrapped.lazy_init(x, deterministic=True)
  chex.assert_trees_all_equal(nnx.state(wrapped, nnx.Param), nnx.state(module, nnx.Param))
  to_linen = nnx.bridge.ToLinen(gnnx.Activation, args=(spec,), kwargs={"num_features": 3},
                                skip_rng=True)  # fmt: skip
  chex.assert_trees_all_equal(to_linen.init(jax.random.key(0), x), linen_vars)


# --- a function, a module or a spec: as the Linen modules take them

# (spec, the same function as gelujax exports it, another library's function computing it)
FUNCTIONS = [
  ("gelu", gelujax.gelu, functools.partial(jax.nn.gelu, approximate=False)),
  ("relu", gelujax.relu, jax.nn.relu),
  ("silu", gelujax.silu, jax.nn.silu),
]


@pytest.mark.parametrize("spec, function, other", FUNCTIONS)
def test_activation_takes_a_function_as_the_linen_module_does(spec, function, other):
  x = GRID.astype(np.float32)

  def values_and_grads(apply):
    return jax.vmap(jax.value_and_grad(apply))(x)

  for fn in (function, other):
    got = values_and_grads(gnnx.Activation(fn))
    linen = functools.partial(gelujax.Activation(fn).apply, {})
    chex.assert_trees_all_equal(got, values_and_grads(linen))
    ref_y, ref_dy = CASES[spec][1](x.astype(np.float64))
    chex.assert_trees_all_close(jax.tree.map(np.float64, got), (ref_y, ref_dy), rtol=2e-6,
                                atol=1e-7)  # fmt: skip
  # The spec is the function it names: the same numbers, bit for bit.
  chex.assert_trees_all_equal(values_and_grads(gnnx.Activation(spec)),
                              values_and_grads(gnnx.Activation(function)))  # fmt: skip
  assert nnx.to_pure_dict(nnx.state(gnnx.Activation(function))) == {}  # no parameters


@pytest.mark.parametrize("spec, function, other", FUNCTIONS)
def test_gated_mlp_takes_a_function_as_the_linen_module_does(spec, function, other):
  x, _ = gated_mlp_data()
  from_spec = gnnx.GatedMLP(4, 5, 3, activation=spec, bias_init=nnx.initializers.normal(0.3),
                            rngs=nnx.Rngs(0))  # fmt: skip
  params = nnx.to_pure_dict(nnx.state(from_spec, nnx.Param))
  for fn in (function, other):
    module = gnnx.GatedMLP(4, 5, 3, activation=fn, rngs=nnx.Rngs(1))
    linen = gelujax.GatedMLP(5, out_features=3, activation=fn)
    chex.assert_trees_all_equal_shapes_and_dtypes(  # the same names and shapes as Linen's
      nnx.to_pure_dict(nnx.state(module, nnx.Param)), linen.init(jax.random.key(0), x)["params"]
    )
    nnx.update(module, nnx.state(from_spec, nnx.Param))
    chex.assert_trees_all_equal(module(x), linen.apply({"params": params}, x))
    if fn is function:  # The spec's block and the function's: the same numbers.
      chex.assert_trees_all_equal(module(x), from_spec(x))
  ref_out = ref_gated_mlp(params, np.float64(x), np.ones((8, 3)), CASES[spec][1])[0]
  chex.assert_trees_all_close(np.asarray(from_spec(x), np.float64), ref_out, rtol=1e-5, atol=1e-5)


def test_an_nnx_module_is_a_submodule_named_as_the_linen_modules_class():
  x = jnp.asarray(X_16x3)
  module = gnnx.Activation(gnnx.LearnableGELU(3, mu_init=0.2, sigma_init=0.5))
  linen = gelujax.Activation(functools.partial(gelujax.LearnableGELU, per_feature=True,
                                               mu_init=0.2, sigma_init=0.5))  # fmt: skip
  variables = linen.init(jax.random.key(0), x)
  chex.assert_trees_all_equal({"params": nnx.to_pure_dict(nnx.state(module, nnx.Param))},
                              variables)  # fmt: skip
  chex.assert_trees_all_equal(module(x), linen.apply(variables, x))
  ref = ref_gaussian_gelu(np.float64(X_16x3), 0.2, 0.5)[0]
  chex.assert_trees_all_close(np.asarray(module(x), np.float64), ref, rtol=2e-6, atol=1e-7)
  wrapped = nnx.bridge.ToNNX(linen, rngs=nnx.Rngs(0)).lazy_init(x)
  chex.assert_trees_all_equal(nnx.state(wrapped, nnx.Param), nnx.state(module, nnx.Param))


def test_an_activation_that_is_no_function_module_or_spec_is_refused_in_one_sentence():
  x = jnp.asarray(X_16x3)
  valid = (r"expected a function of an array \(gelujax.gelu, jax.nn.relu\), an nnx.Module "
           r"instance \(gelujax.nnx.LearnableGELU\(4\)\) or an activation spec \('gelu', "
           r"'gaussian_gelu\(sigma=0.5\)'; gelujax.activation_names\(\)\)\.$")  # fmt: skip
  with pytest.raises(TypeError, match=r"^Activation got activation=3, an int; " + valid):
    gnnx.Activation(3)
  with pytest.raises(TypeError, match=r"^GatedMLP got activation=None, a NoneType; " + valid):
    gnnx.GatedMLP(4, 5, activation=None, rngs=nnx.Rngs(0))
  with pytest.raises(TypeError, match=r"^Activation got activation=<class 'gelujax.linen.Learna"
                                      r"bleGELU'>, a class; " + valid):  # fmt: skip
    gnnx.Activation(gelujax.LearnableGELU)  # Linen's class: NNX modules are made, then passed
  with pytest.raises(TypeError, match=r"^Activation got activation=3, an int; expected a "
                                      r"function of an array \(gelujax.gelu, jax.nn.relu\), a "
                                      r"Linen module class"):  # fmt: skip
    gelujax.Activation(3).apply({}, x)
  with pytest.raises(TypeError, match=r"^GatedMLP got activation=3.0, a float; expected a "):
    gelujax.GatedMLP(5, activation=3.0).init(jax.random.key(0), x)


# --- soi_map's randomness and the deterministic switch


def test_soi_map_draws_from_its_stream_unless_deterministic():
  x = jnp.asarray(X_16x3)
  module = gnnx.Activation("soi_map", rngs=nnx.Rngs(dropout=3))
  y = np.asarray(module(x))  # deterministic=False by default, like nnx.Dropout
  assert np.all((y == 0) | (y == np.asarray(x))) and 0 < np.count_nonzero(y) < y.size
  assert not np.array_equal(np.asarray(module(x)), y)  # the stream moves on
  key = jax.random.key(7)
  chex.assert_trees_all_equal(module(x, rngs=key), gelujax.soi_map(x, key, train=True))
  module.eval()
  expected = ref_gelu(np.float64(X_16x3))[0]
  chex.assert_trees_all_close(np.asarray(module(x), np.float64), expected, rtol=2e-6, atol=1e-7)
  assert not np.array_equal(np.asarray(nnx.view(module, deterministic=False)(x)), module(x))
  module.train()
  assert np.count_nonzero(np.asarray(module(x, deterministic=False)) == 0) > 0
  with pytest.raises(ValueError, match=r"draws a random mask .* pass rngs"):
    gnnx.Activation("soi_map")(x)
  with pytest.raises(ValueError, match=r"needs deterministic=True or False"):
    gnnx.Activation("soi_map", deterministic=None)(x)


def test_bad_arguments_are_refused_with_what_would_be_valid():
  with pytest.raises(ValueError, match=r"transformers:quick_gelu \(computes gelujax's gelu_sig"):
    gnnx.Activation("quick_gelu")
  with pytest.raises(ValueError, match=r"Bad arguments in activation 'gelu\(mu=1.0\)'"):
    gnnx.Activation("gelu(mu=1.0)")
  with pytest.raises(ValueError, match=r"one \(mu, sigma\) per feature; pass num_features"):
    gnnx.Activation("learnable_gelu(per_feature=True)")
  with pytest.raises(ValueError, match="sigma_init must be a positive float"):
    gnnx.LearnableGELU(sigma_init=0.0)
  with pytest.raises(ValueError, match=r"num_features=0\): expected an integer >= 1"):
    gnnx.LearnableGELU(0)
  with pytest.raises(ValueError, match=r"shape \(16, 3\); its last axis must have 4 features"):
    gnnx.LearnableGELU(4)(X_16x3)


# --- GatedMLP: NNX = Linen = float64 reference


@pytest.mark.parametrize("name", ["gelu", "silu", "relu", "gelu_tanh"])
def test_gated_mlp_matches_linen_and_the_float64_reference(name):
  x, cotangent = gated_mlp_data()
  module = gnnx.GatedMLP(4, 5, 3, activation=name, bias_init=nnx.initializers.normal(0.3),
                         rngs=nnx.Rngs(0))  # fmt: skip
  params = nnx.to_pure_dict(nnx.state(module, nnx.Param))
  linen = gelujax.GatedMLP(5, out_features=3, activation=name)
  linen_params = linen.init(jax.random.key(0), x)["params"]
  chex.assert_trees_all_equal_shapes_and_dtypes(params, linen_params)  # the same names and shapes
  chex.assert_trees_all_equal(module(x), linen.apply({"params": params}, x))

  def loss(m, v):
    return (m(v) * cotangent).sum()

  grads, d_x = nnx.grad(loss, argnums=(0, 1))(module, x)
  ref_out, ref_grads, ref_dx = ref_gated_mlp(params, np.float64(x), cotangent, CASES[name][1])
  chex.assert_trees_all_close(np.asarray(module(x), np.float64), ref_out, rtol=1e-5, atol=1e-5)
  chex.assert_trees_all_close(jax.tree.map(np.float64, nnx.to_pure_dict(grads)), ref_grads,
                              rtol=1e-5, atol=1e-5)  # fmt: skip
  chex.assert_trees_all_close(np.asarray(d_x, np.float64), ref_dx, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_gated_mlp_gates_outputs_and_determinism():
  x, _ = gated_mlp_data()
  block = gnnx.GatedMLP(4, 6, rngs=nnx.Rngs(0))
  assert block(x).shape == (8, 4)  # out_features: in_features
  learnable = gnnx.GatedMLP(4, 6, activation="learnable_gelu(per_feature=True)", rngs=nnx.Rngs(0))
  assert learnable.gate.learnable_gelu.mu.shape == (6,)
  linen = gelujax.GatedMLP(6, activation="learnable_gelu(per_feature=True)")
  chex.assert_trees_all_equal_shapes(
    nnx.to_pure_dict(nnx.state(learnable, nnx.Param)), linen.init(jax.random.key(0), x)["params"]
  )
  soi = gnnx.GatedMLP(4, 6, activation="soi_map", rngs=nnx.Rngs(0))
  nnx.update(soi, nnx.state(block, nnx.Param))
  assert np.abs(np.asarray(soi(x)) - np.asarray(block(x))).max() > 1e-3  # a random mask
  soi.eval()
  chex.assert_trees_all_equal(soi(x), block(x))  # its expectation: the GELU gate
  chex.assert_trees_all_equal(soi(x, deterministic=True), block(x))
  typed = gnnx.GatedMLP(4, 6, dtype=jnp.bfloat16, param_dtype=jnp.float16, rngs=nnx.Rngs(0))
  assert typed.hidden.kernel.dtype == jnp.float16 and typed(x).dtype == jnp.bfloat16


# --- an NNX model trains with nnx.Optimizer


class MLP(nnx.Module):
  def __init__(self, rngs: nnx.Rngs):
    self.hidden = nnx.Linear(3, 16, rngs=rngs)
    self.act = gnnx.Activation("learnable_gelu(per_feature=True)", num_features=16)
    self.out = nnx.Linear(16, 1, rngs=rngs)

  def __call__(self, x):
    return self.out(self.act(self.hidden(x)))


def mse(model, x, y):
  return jnp.mean((model(x) - y) ** 2)


def reference_sgd_step(params: dict, x: np.ndarray, y: np.ndarray, lr: float) -> dict:
  """One SGD step of MLP's mean squared error, backpropagated by hand in float64."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  w1, b1 = p["hidden"]["kernel"], p["hidden"]["bias"]
  mu, log_sigma = p["act"]["learnable_gelu"]["mu"], p["act"]["learnable_gelu"]["log_sigma"]
  w2, b2 = p["out"]["kernel"], p["out"]["bias"]
  sigma = np.exp(log_sigma)
  z = x @ w1 + b1
  a, da_dz, da_dmu, da_dsigma = ref_gaussian_gelu(z, mu, sigma)
  d_out = 2 * (a @ w2 + b2 - y) / y.size
  d_a = d_out @ w2.T
  d_z = d_a * da_dz
  grads = {
    "hidden": {"kernel": x.T @ d_z, "bias": d_z.sum(0)},
    "act": {
      "learnable_gelu": {
        "mu": (d_a * da_dmu).sum(0),
        "log_sigma": sigma * (d_a * da_dsigma).sum(0),
      }
    },
    "out": {"kernel": a.T @ d_out, "bias": d_out.sum(0)},
  }
  return jax.tree.map(lambda w, g: w - lr * g, p, grads)


def test_nnx_mlp_trains_with_nnx_optimizer():
  rng = np.random.default_rng(0)
  x = rng.uniform(-2, 2, (64, 3))
  y = np.sin(x @ np.array([[1.0], [-0.5], [0.25]]))  # a smooth target the MLP can fit
  x32, y32 = x.astype(np.float32), y.astype(np.float32)
  model = MLP(nnx.Rngs(0))
  lr = 0.1
  optimizer = nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)

  @nnx.jit
  def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(mse)(model, x, y)
    optimizer.update(model, grads)
    return loss

  before = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  first_loss = float(train_step(model, optimizer, x32, y32))
  after = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  expected = reference_sgd_step(before, x32.astype(np.float64), y, lr)
  chex.assert_trees_all_close(jax.tree.map(np.float64, after), expected, rtol=1e-5, atol=1e-6)

  losses = [float(train_step(model, optimizer, x32, y32)) for _ in range(200)]
  assert losses[-1] < 0.15 * first_loss, (first_loss, losses[-1])  # measured: 0.099x
  assert int(optimizer.step[...]) == 201
  learned = model.act.learnable_gelu
  assert np.abs(np.asarray(learned.mu[...])).max() > 1e-3  # mu moved from its initial 0
  assert np.abs(np.asarray(learned.log_sigma[...])).max() > 1e-3


@pytest.mark.slow
def test_module_docstring_example_runs():
  results = doctest.testmod(gnnx, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert results.attempted >= 12 and results.failed == 0


def test_the_nnx_char_gpt_has_the_linen_models_parameters_and_outputs():
  """One parameter tree: the Linen model's parameters loaded into the NNX twin give its logits
  (to float32 rounding: two programs), and the NNX model is causal too."""
  ids = np.random.default_rng(0).integers(0, 11, (2, 8))
  linen = models.MODELS.get("char_gpt_tiny")(vocab_size=11, activation="gelu")
  params = linen.init(jax.random.key(0), ids, train=False)["params"]
  model = gnnx.CharGPT(11, 8, width=16, depth=1, num_heads=2, hidden_features=64,
                       activation="gelu", deterministic=True, rngs=nnx.Rngs(1))  # fmt: skip
  state = nnx.state(model, nnx.Param)
  chex.assert_trees_all_equal_shapes_and_dtypes(nnx.to_pure_dict(state), params)
  nnx.replace_by_pure_dict(state, params)
  nnx.update(model, state)
  expected = linen.apply({"params": params}, ids, train=False)
  np.testing.assert_allclose(model(ids), expected, rtol=1e-5, atol=1e-5)
  later = ids.copy()
  later[:, 5:] = (later[:, 5:] + 1) % 11
  np.testing.assert_array_equal(np.asarray(model(later))[:, :5], np.asarray(model(ids))[:, :5])
  with pytest.raises(ValueError, match="windows of 9 characters; give at most 8"):
    model(np.zeros((1, 9), np.int32))
