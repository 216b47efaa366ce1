"""Tests for the transformer modules (gelujax.linen and gelujax.nnx ``TransformerBlock``,
``Encoder``, ``FeedForward``) and the gated linear units' predicate (gelujax.specs.gated_unit),
against float64 NumPy references written from the formulas, never the modules' own output."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import errors as flax_errors
from flax import nnx
from scipy import special

import gelujax
from gelujax import nnx as gnnx
from gelujax.specs import gated_unit

# --- which activations are gated linear units: gelujax.specs.gated_unit

GATED = [
  "geglu",
  "geglu(approximate=True)",
  "swiglu",
  "reglu",
  "gated(activation='gelu_tanh')",
  gelujax.geglu,
  functools.partial(gelujax.geglu, approximate=True),
  functools.partial(gelujax.gated, activation=jax.nn.sigmoid),
  jax.nn.glu,  # Flax's glu: gated(x, sigmoid)
]
PLAIN = [
  "gelu",
  "gelu_tanh",
  "gelu(approximate=True)",
  "torch:gelu",
  "jax.numpy:tanh",  # a user's "module:function"
  "learnable_gelu(per_feature=True)",
  gelujax.gelu,
  jax.nn.relu,
  gelujax.LearnableGELU,
]


def test_gated_unit_tells_the_units_from_element_wise_activations():
  for activation in GATED:
    assert gated_unit(activation) is not None, activation
  for activation in PLAIN:
    assert gated_unit(activation) is None, activation


def test_a_units_spec_is_the_unit_it_names():
  x = jnp.asarray(np.linspace(-3, 3, 12).reshape(2, 6), jnp.float32)
  v, g = np.float64(x[:, :3]), np.float64(x[:, 3:])
  # value * gate's activation, the gate the second half: by the formulas, in float64.
  tanh_gelu = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g**3)))
  expected = {
    "geglu(approximate=True)": v * tanh_gelu,
    "gated(activation='gelu_tanh')": v * tanh_gelu,
    "swiglu": v * g / (1 + np.exp(-g)),
    "reglu": v * np.maximum(g, 0),
  }
  for spec, value in expected.items():
    got = gated_unit(spec)(x)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(np.float64(got), value, rtol=1e-6, atol=1e-6, err_msg=spec)


def test_a_units_bad_spec_is_refused_saying_why():
  cases = [
    ("geglu(approximate=1)", r"^Bad arguments in gated linear unit 'geglu\(approximate=1\)': "
                             r"approximate must be True or False, not 1\.$"),
    ("swiglu(beta=2.0)", r"^Bad arguments in gated linear unit 'swiglu\(beta=2.0\)': got an "
                         r"unexpected keyword argument 'beta'\.$"),
    ("gated", r"^Gated linear unit 'gated' needs its gate's activation, as in "
              r"\"gated\(activation='silu'\)\"\.$"),
    ("gated(activation=3)", r"activation must be the gate's activation spec, such as 'silu', "
                            r"not 3\.$"),
    ("gated(activation='soi_map')", r"its gate must be an element-wise function, and 'soi_map' "
                                    r"needs a module .* use GatedMLP"),
    ("gated(activation='gelu_new')", r"transformers:gelu_new"),  # the gate's own hint
  ]  # fmt: skip
  for spec, message in cases:
    with pytest.raises(ValueError, match=message):
      gated_unit(spec)
  with pytest.raises(ValueError, match=r"gelujax.gated needs its gate's activation bound"):
    gated_unit(gelujax.gated)


def test_a_units_name_cannot_be_registered_as_an_activation():
  with pytest.raises(ValueError, match=r"^register_activation: 'swiglu' is the name of a gated "
                                       r"linear unit \(gelujax.swiglu\)"):  # fmt: skip
    gelujax.register_activation("swiglu", jax.nn.silu)


# --- the parameter-count rule: gated_hidden_features


def test_gated_hidden_features_is_the_brute_force_nearest_count():
  from gelujax.models import dense_parameter_count  # an independent count of the same layers

  for d in range(1, 25):
    for h in [*range(1, 41), 255, 256, 1000, 3072]:
      plain = dense_parameter_count((d, h, d))
      assert plain == 2 * d * h + h + d
      counts = {g: dense_parameter_count((d, g, d), gated=True) for g in range(1, 2 * h + 2)}
      assert counts[1] == d * 2 + 2 + d + d
      best = min(counts, key=lambda g: (abs(counts[g] - plain), g))  # the smaller on a tie
      assert gelujax.gated_hidden_features(d, h) == best, (d, h)
      # Shazeer's 2/3, less what the biases take: h (2d + 1) / (3d + 2) = 2h/3 - h / (9d + 6).
      assert abs(best - 2 * h / 3) <= 0.5 + h / (9 * d + 6) + 1e-9, (d, h)
      assert abs(counts[best] - plain) <= (3 * d + 2) / 2  # within the rounding of g


def test_gated_hidden_features_worked_example():
  # d = 64, h = 256: the plain block has 2*64*256 + 256 + 64 = 33,088 parameters; 2/3 of 256
  # is 170.67, but g = 170 has 64*340 + 340 + 170*64 + 64 = 33,044 (-44) and 171 has 33,238
  # (+150).
  assert gelujax.gated_hidden_features(64, 256) == 170
  assert gelujax.gated_hidden_features(512, 2048) == 1365  # gated_features' example


def test_gated_hidden_features_refuses_a_width_below_one():
  with pytest.raises(ValueError, match=r"^gated_hidden_features\(hidden_features=0\): "
                                       r"hidden_features must be an integer >= 1\.$"):  # fmt: skip
    gelujax.gated_hidden_features(8, 0)


# --- float64 references, from the formulas

B, L, D, HEADS, HIDDEN = 2, 6, 16, 4, 32
EPSILON = 1e-6  # flax's LayerNorm's
SQRT_2_PI = np.sqrt(2 / np.pi)


def ref_gelu(z):
  return 0.5 * z * (1 + special.erf(z / np.sqrt(2)))


def ref_gelu_tanh(z):
  return 0.5 * z * (1 + np.tanh(SQRT_2_PI * (z + 0.044715 * z**3)))


# activation -> (the reference of the activation or the gate's, whether it is a unit)
REFERENCES = {
  "gelu": (ref_gelu, False),
  "gelu_tanh": (ref_gelu_tanh, False),
  "gelu(approximate=True)": (ref_gelu_tanh, False),
  "jax.numpy:tanh": (np.tanh, False),
  "geglu": (ref_gelu, True),
  "geglu(approximate=True)": (ref_gelu_tanh, True),
  "swiglu": (lambda z: z * special.expit(z), True),
  "reglu": (lambda z: np.maximum(z, 0), True),
}


def ref_layer_norm(x, p):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + EPSILON) * p["scale"] + p["bias"]


def ref_attention(x, p, mask):
  """Multi-head self-attention; a query and a key both real see each other, any other pair's
  logit is a large negative before the softmax."""
  q, k, v = (np.einsum("bld,dhk->blhk", x, p[n]["kernel"]) + p[n]["bias"]
             for n in ("query", "key", "value"))  # fmt: skip
  logits = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
  if mask is not None:
    logits = np.where(mask[:, None, :, None] & mask[:, None, None, :], logits, -1e30)
  weights = special.softmax(logits, axis=-1)
  heads = np.einsum("bhqs,bshk->bqhk", weights, v)
  return np.einsum("bqhk,hkd->bqd", heads, p["out"]["kernel"]) + p["out"]["bias"]


def ref_feed_forward(x, p, activation):
  act, unit = REFERENCES[activation]
  z = x @ p["hidden"]["kernel"] + p["hidden"]["bias"]
  if unit:
    value, gate = np.split(z, 2, axis=-1)  # the value first, the gate second
    h = value * act(gate)
  else:
    h = act(z)
  return h @ p["out"]["kernel"] + p["out"]["bias"]


def ref_block(x, p, mask, activation):
  """Pre-LN: each branch reads the normalised stream and adds to the stream itself."""
  x = x + ref_attention(ref_layer_norm(x, p["attention_norm"]), p["attention"], mask)
  return x + ref_feed_forward(ref_layer_norm(x, p["mlp_norm"]), p["mlp"], activation)


def ref_encoder(x, p, mask, activation, num_layers):
  for i in range(num_layers):
    x = ref_block(x, p[f"block_{i}"], mask, activation)
  return ref_layer_norm(x, p["final_norm"])


def data(garbage_seed: int = 1):
  """Inputs ``[B, L, D]`` and a padding mask; the padded positions carry large garbage drawn
  from ``garbage_seed``, the real ones the same values whatever the seed."""
  x = np.random.default_rng(0).normal(size=(B, L, D))
  mask = np.array([[True] * 4 + [False] * 2, [True] * L])
  garbage = 30 * np.random.default_rng(garbage_seed).normal(size=(B, L, D))
  return np.where(mask[..., None], x, garbage).astype(np.float32), mask


def perturbed(params, seed: int = 2):
  """The module's initialised parameters plus noise, so that no zero bias or unit scale hides
  a bias or a scale applied in the wrong place."""
  leaves, tree = jax.tree.flatten(params)
  rng = np.random.default_rng(seed)
  return jax.tree.unflatten(
    tree, [jnp.asarray(a + 0.2 * rng.normal(size=a.shape), jnp.float32) for a in leaves]
  )


def linen_and_nnx(num_layers: int | None, activation, **kwargs):
  """The Linen module with perturbed parameters, and the NNX twin with them copied in; a block
  when ``num_layers`` is None, else an encoder."""
  x, mask = data()
  if num_layers is None:
    linen = gelujax.TransformerBlock(HEADS, HIDDEN, activation, **kwargs)
    module = gnnx.TransformerBlock(D, HEADS, HIDDEN, activation=activation, rngs=nnx.Rngs(0),
                                   **kwargs)  # fmt: skip
  else:
    linen = gelujax.Encoder(num_layers, HEADS, HIDDEN, activation, **kwargs)
    module = gnnx.Encoder(D, num_layers, HEADS, HIDDEN, activation=activation,
                          rngs=nnx.Rngs(0), **kwargs)  # fmt: skip
  params = perturbed(linen.init(jax.random.key(0), x, mask)["params"])
  state = nnx.state(module, nnx.Param)
  chex.assert_trees_all_equal_shapes_and_dtypes(nnx.to_pure_dict(state), params)
  nnx.replace_by_pure_dict(state, params)
  nnx.update(module, state)
  return linen, params, module


# float32 against float64: every output is a few sums of at most 2 g = 42 products and a
# LayerNorm, softmax and activation of them, with values of order 1 to 10; float32 keeps 2^-24
# relative (6e-8) in each rounding, so errors of some 1e-6 are expected. Measured over the
# activations here, blocks and encoders: at most 1.8e-6 on outputs up to 8.2. 1e-5 leaves room
# for another backend's sums, and is far below what a misplaced norm, bias or mask changes
# (order 0.1 to 1).
RTOL = ATOL = 1e-5


@pytest.mark.parametrize("activation", list(REFERENCES))
def test_a_block_is_the_float64_reference(activation):
  x, mask = data()
  linen, params, module = linen_and_nnx(None, activation)
  expected = ref_block(np.float64(x), jax.tree.map(np.float64, params), mask, activation)
  out = linen.apply({"params": params}, x, mask)
  real = mask[..., None].repeat(D, -1)  # a padded position's output is no one's concern
  np.testing.assert_allclose(np.float64(out)[real], expected[real], rtol=RTOL, atol=ATOL)
  assert np.isfinite(np.asarray(out)).all()
  # The NNX twin with the same parameters: the same numbers, to float32 rounding.
  np.testing.assert_allclose(module(x, mask), out, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("activation", ["gelu", "geglu"])
def test_an_encoder_is_the_float64_reference(activation):
  x, mask = data()
  linen, params, module = linen_and_nnx(2, activation)
  expected = ref_encoder(np.float64(x), jax.tree.map(np.float64, params), mask, activation, 2)
  out = linen.apply({"params": params}, x, mask)
  real = mask[..., None].repeat(D, -1)
  np.testing.assert_allclose(np.float64(out)[real], expected[real], rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(module(x, mask), out, rtol=1e-6, atol=1e-6)
  # Without a mask, every position is real.
  expected = ref_encoder(np.float64(x), jax.tree.map(np.float64, params), None, activation, 2)
  unmasked = linen.apply({"params": params}, x)
  np.testing.assert_allclose(np.float64(unmasked), expected, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(module(x), unmasked, rtol=1e-6, atol=1e-6)


def test_padded_positions_never_change_the_real_ones():
  x, mask = data(garbage_seed=1)
  other, _ = data(garbage_seed=5)
  assert np.array_equal(x[mask], other[mask]) and not np.array_equal(x, other)
  linen, params, module = linen_and_nnx(2, "gelu")
  for apply in (functools.partial(linen.apply, {"params": params}), module):
    out, out_other = np.asarray(apply(x, mask)), np.asarray(apply(other, mask))
    assert np.array_equal(out[mask], out_other[mask])  # bitwise: the same program
    # ... and it is the mask that keeps them apart: without it the garbage reaches them.
    assert not np.allclose(np.asarray(apply(x))[mask], np.asarray(apply(other))[mask])


# --- Linen and NNX: one parameter tree


@pytest.mark.parametrize("activation", ["gelu", "swiglu", "learnable_gelu(per_feature=True)"])
def test_linen_and_nnx_have_one_parameter_tree(activation):
  x, mask = data()
  linen = gelujax.Encoder(2, HEADS, HIDDEN, activation)
  linen_params = linen.init(jax.random.key(0), x, mask)["params"]
  module = gnnx.Encoder(D, 2, HEADS, HIDDEN, activation=activation, rngs=nnx.Rngs(0))
  nnx_params = nnx.to_pure_dict(nnx.state(module, nnx.Param))
  chex.assert_trees_all_equal_shapes_and_dtypes(nnx_params, linen_params)
  block = linen_params["block_1"]
  assert set(linen_params) == {"block_0", "block_1", "final_norm"}
  assert set(block) == {"attention_norm", "attention", "mlp_norm", "mlp"}
  assert jax.tree.map(np.shape, block["attention"]) == {
    n: {"kernel": (D, HEADS, D // HEADS), "bias": (HEADS, D // HEADS)}
    for n in ("query", "key", "value")
  } | {"out": {"kernel": (HEADS, D // HEADS, D), "bias": (D,)}}
  # nnx.bridge wraps the Linen module into the same tree.
  wrapped = nnx.bridge.ToNNX(linen, rngs=nnx.Rngs(0)).lazy_init(x, mask)
  chex.assert_trees_all_equal_shapes_and_dtypes(
    nnx.to_pure_dict(nnx.state(wrapped, nnx.Param)), nnx_params
  )


# --- the feed-forward block: plain or gated, at one parameter count


def parameter_count(params) -> int:
  return sum(np.size(a) for a in jax.tree.leaves(params))


@pytest.mark.parametrize("activation", GATED)
def test_a_gated_unit_gets_the_gated_block_at_the_plain_blocks_count(activation):
  x, mask = data()
  g = gelujax.gated_hidden_features(D, HIDDEN)
  assert g == 21  # round(32 * 33 / 50)
  plain = gelujax.TransformerBlock(HEADS, HIDDEN, "gelu").init(jax.random.key(0), x, mask)
  block = gelujax.TransformerBlock(HEADS, HIDDEN, activation)
  params = block.init(jax.random.key(0), x, mask)["params"]
  assert jax.tree.map(np.shape, params["mlp"]) == {
    "hidden": {"kernel": (D, 2 * g), "bias": (2 * g,)},
    "out": {"kernel": (g, D), "bias": (D,)},
  }
  difference = parameter_count(params) - parameter_count(plain["params"])
  assert abs(difference) <= (3 * D + 2) / 2  # the rule's rounding of g
  assert difference == 21 * (3 * D + 2) - HIDDEN * (2 * D + 1)  # -6
  module = gnnx.TransformerBlock(D, HEADS, HIDDEN, activation=activation, rngs=nnx.Rngs(0))
  chex.assert_trees_all_equal_shapes(nnx.to_pure_dict(nnx.state(module, nnx.Param)), params)
  assert module(x, mask).shape == (B, L, D)


@pytest.mark.parametrize("activation", PLAIN)
def test_an_element_wise_activation_gets_the_plain_block(activation):
  x, mask = data()
  if activation is gelujax.LearnableGELU:  # A Linen module class: Linen's own.
    params = gelujax.FeedForward(HIDDEN, activation).init(jax.random.key(0), x)["params"]
    assert params["act"]["learnable_gelu"]["mu"].shape == ()
  else:
    block = gelujax.TransformerBlock(HEADS, HIDDEN, activation)
    params = block.init(jax.random.key(0), x, mask)["params"]["mlp"]
    module = gnnx.FeedForward(D, HIDDEN, activation=activation, rngs=nnx.Rngs(0))
    chex.assert_trees_all_equal_shapes(nnx.to_pure_dict(nnx.state(module, nnx.Param)), params)
  assert params["hidden"]["kernel"].shape == (D, HIDDEN)
  assert params["out"]["kernel"].shape == (HIDDEN, D)


# --- dtypes, dropout


@pytest.mark.slow
def test_bfloat16_computes_in_bfloat16_with_float32_parameters():
  x, mask = data()
  linen, params, module = linen_and_nnx(2, "geglu", dtype=jnp.bfloat16)
  float32 = {jnp.dtype(jnp.float32)}
  assert {a.dtype for a in jax.tree.leaves(nnx.state(module, nnx.Param))} == float32
  assert {a.dtype for a in jax.tree.leaves(params)} == float32
  for apply in (functools.partial(linen.apply, {"params": params}), module):
    out = apply(x, mask)
    assert out.dtype == jnp.bfloat16
    # Every product of the program, attention's included, takes bfloat16 operands.
    jaxpr = jax.make_jaxpr(apply)(x, mask)
    dots = [e for e in _equations(jaxpr.jaxpr) if e.primitive.name == "dot_general"]
    assert len(dots) == 2 * (6 + 2)  # per block: q, k, v, logits, weights x values, out; 2 dense
    assert {v.aval.dtype for e in dots for v in e.invars} == {jnp.dtype(jnp.bfloat16)}
  # bfloat16 keeps 8 significant bits (2^-8 = 4e-3 relative) in every rounding, through two
  # blocks: measured within 0.063 of the float64 reference on outputs up to 2.7.
  expected = ref_encoder(np.float64(x), jax.tree.map(np.float64, params), mask, "geglu", 2)
  np.testing.assert_allclose(np.float64(out)[mask], expected[mask], rtol=0, atol=0.2)
  # A block alone too: its residual stream is bfloat16, not float32 plus bfloat16 branches.
  linen, params, module = linen_and_nnx(None, "gelu", dtype=jnp.bfloat16)
  assert linen.apply({"params": params}, x, mask).dtype == module(x, mask).dtype == jnp.bfloat16
  param_typed = gelujax.TransformerBlock(HEADS, HIDDEN, param_dtype=jnp.bfloat16)
  variables = param_typed.init(jax.random.key(0), x)
  assert {a.dtype for a in jax.tree.leaves(variables)} == {jnp.dtype(jnp.bfloat16)}


def _equations(jaxpr):
  """The equations of ``jaxpr`` and of the jaxprs inside it (pjit, custom_jvp)."""
  for eqn in jaxpr.eqns:
    yield eqn
    for param in eqn.params.values():
      inner = getattr(param, "jaxpr", param)
      if hasattr(inner, "eqns"):
        yield from _equations(inner)


def test_dropout_acts_only_when_not_deterministic():
  x, mask = data()
  linen, params, module = linen_and_nnx(2, "gelu", dropout=0.5)
  no_dropout = gelujax.Encoder(2, HEADS, HIDDEN, "gelu").apply({"params": params}, x, mask)
  chex.assert_trees_all_equal(linen.apply({"params": params}, x, mask), no_dropout)
  dropped = linen.apply({"params": params}, x, mask, deterministic=False,
                        rngs={"dropout": jax.random.key(1)})  # fmt: skip
  assert np.abs(np.asarray(dropped - no_dropout)).max() > 0.1
  with pytest.raises(flax_errors.InvalidRngError):  # Linen: the 'dropout' stream is needed
    linen.apply({"params": params}, x, mask, deterministic=False)
  # NNX: nnx.Dropout's conventions, not deterministic until eval().
  assert np.abs(np.asarray(module(x, mask) - no_dropout)).max() > 0.1
  module.eval()
  np.testing.assert_allclose(module(x, mask), no_dropout, rtol=1e-6, atol=1e-6)
  assert np.abs(np.asarray(module(x, mask, deterministic=False) - no_dropout)).max() > 0.1


def test_dropout_drops_the_branches_never_the_residual_stream():
  x, mask = data()
  linen, params, module = linen_and_nnx(None, "gelu", dropout=0.5)
  # Both branches' last layers zeroed: each branch adds 0, dropped or not, so the block is the
  # identity; dropout on the stream itself would zero or double its entries.
  silent = jax.tree.map(lambda a: a, params)
  for branch in ("attention", "mlp"):
    silent[branch]["out"] = jax.tree.map(jnp.zeros_like, params[branch]["out"])
  state = nnx.state(module, nnx.Param)
  nnx.replace_by_pure_dict(state, silent)
  nnx.update(module, state)
  out = linen.apply({"params": silent}, x, mask, deterministic=False,
                    rngs={"dropout": jax.random.key(1)})  # fmt: skip
  chex.assert_trees_all_equal(out, jnp.asarray(x))
  chex.assert_trees_all_equal(module(x, mask, deterministic=False), jnp.asarray(x))


# --- refusals: one sentence naming the argument, the value and what would be valid


def test_bad_sizes_and_rates_are_refused():
  x, _ = data()
  rngs = nnx.Rngs(0)
  heads = (r"^{}\(num_heads=3\): num_heads must divide the 16 features, each head taking "
           r"features / num_heads of them; one of 1, 2, 4, 8, 16\.(\n|$)")  # fmt: skip
  with pytest.raises(ValueError, match=heads.format("TransformerBlock")):
    gelujax.TransformerBlock(3, HIDDEN).init(jax.random.key(0), x)
  with pytest.raises(ValueError, match=heads.format("TransformerBlock")):
    gnnx.TransformerBlock(D, 3, HIDDEN, rngs=rngs)
  with pytest.raises(ValueError, match=heads.format("Encoder")):
    gelujax.Encoder(2, 3, HIDDEN).init(jax.random.key(0), x)
  with pytest.raises(ValueError, match=heads.format("Encoder")):
    gnnx.Encoder(D, 2, 3, HIDDEN, rngs=rngs)
  sizes = [
    (lambda: gelujax.TransformerBlock(0, HIDDEN).init(jax.random.key(0), x), "TransformerBlock",
     "num_heads", "0"),
    (lambda: gnnx.TransformerBlock(D, 4, -1, rngs=rngs), "TransformerBlock", "hidden_features",
     "-1"),
    (lambda: gnnx.TransformerBlock(0, 4, HIDDEN, rngs=rngs), "TransformerBlock", "features", "0"),
    (lambda: gelujax.Encoder(0, 4, HIDDEN).init(jax.random.key(0), x), "Encoder", "num_layers",
     "0"),
    (lambda: gnnx.Encoder(D, 2.0, 4, HIDDEN, rngs=rngs), "Encoder", "num_layers", "2.0"),
    (lambda: gnnx.FeedForward(D, True, rngs=rngs), "FeedForward", "hidden_features", "True"),
  ]  # fmt: skip
  for make, owner, name, value in sizes:
    with pytest.raises(ValueError, match=rf"^{owner}\({name}={value}\): {name} must be an "
                                         r"integer >= 1\.(\n|$)"):  # fmt: skip
      make()
  for rate in (1.0, -0.1, "0.1"):
    message = (rf"^{{}}\(dropout={rate!r}\): dropout is the residual branches' drop rate, a "
               r"number in \[0, 1\)\.(\n|$)")  # fmt: skip
    with pytest.raises(ValueError, match=message.format("TransformerBlock")):
      gelujax.TransformerBlock(HEADS, HIDDEN, dropout=rate).init(jax.random.key(0), x)
    with pytest.raises(ValueError, match=message.format("Encoder")):
      gnnx.Encoder(D, 2, HEADS, HIDDEN, dropout=rate, rngs=rngs)


def test_a_bad_mask_or_input_is_refused():
  x, mask = data()
  linen = gelujax.Encoder(1, HEADS, HIDDEN)
  params = linen.init(jax.random.key(0), x)
  module = gnnx.Encoder(D, 1, HEADS, HIDDEN, rngs=nnx.Rngs(0))
  block = gnnx.TransformerBlock(D, HEADS, HIDDEN, rngs=nnx.Rngs(0))
  bad_masks = [
    (mask[:, :-1], r"\(2, 5\) and dtype bool"),  # a position short
    (mask[None], r"\(1, 2, 6\) and dtype bool"),  # [1, batch, length]
    (mask.astype(np.int32), r"\(2, 6\) and dtype int32"),  # 0/1, not booleans
  ]
  for bad, got in bad_masks:
    message = (rf"^{{}} got a mask of shape {got} for an input of shape \(2, 6, 16\); "
               r"the mask must be boolean \[batch, length\] = \(2, 6\), True for a "
               r"real token\.(\n|$)")  # fmt: skip
    with pytest.raises(ValueError, match=message.format("Encoder")):
      linen.apply(params, x, bad)
    with pytest.raises(ValueError, match=message.format("Encoder")):
      module(x, bad)
    with pytest.raises(ValueError, match=message.format("TransformerBlock")):
      block(x, bad)
  with pytest.raises(ValueError, match=r"^Encoder got an input of shape \(2, 96\); it takes "
                                       r"\[batch, length, features\]\.(\n|$)"):  # fmt: skip
    linen.apply(params, x.reshape(2, -1))
  in_features = (r"^Encoder\(in_features=16\) got an input of shape \(2, 6, 8\); it takes "
                 r"\[batch, length, 16\]\.(\n|$)")  # fmt: skip
  with pytest.raises(ValueError, match=in_features):
    module(x[..., :8])
  with pytest.raises(ValueError, match=r"^Unknown activation 'gelu_typo'"):
    gnnx.TransformerBlock(D, HEADS, HIDDEN, activation="gelu_typo", rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"^Bad arguments in gated linear unit 'geglu\(tanh=1\)'"):
    gelujax.TransformerBlock(HEADS, HIDDEN, "geglu(tanh=1)").init(jax.random.key(0), x)


def test_a_function_that_changes_the_width_is_refused():
  x, _ = data()
  halves = lambda z: z[..., : z.shape[-1] // 2]  # noqa: E731  a unit no registry knows
  message = (r"^FeedForward got activation=<function .*>, which maps an input of shape \(1, 6\) "
             r"to \(1, 3\); an activation keeps its input's shape, and a gated linear unit of "
             r"one's own is functools.partial\(gelujax.gated, activation=<the gate's "
             r"activation>\)\.(\n|$)")  # fmt: skip
  with pytest.raises(ValueError, match=message):
    gelujax.TransformerBlock(HEADS, HIDDEN, halves).init(jax.random.key(0), x)
  with pytest.raises(ValueError, match=message):
    gnnx.TransformerBlock(D, HEADS, HIDDEN, activation=halves, rngs=nnx.Rngs(0))
