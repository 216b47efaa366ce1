"""Tests for the transformer modules (gelujax.linen and gelujax.nnx ``TransformerBlock``,
``Encoder``, ``FeedForward``) and the gated linear units' predicate (gelujax.specs.gated_unit),
against float64 NumPy references written from the formulas, never the modules' own output."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gelujax
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
  jax.nn.glu,  # halves its input too, but is no registered unit: element-wise by the rule
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
