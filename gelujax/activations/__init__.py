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

The package's modules: ``registry`` (:data:`ACTIVATIONS` and the checks of a spec's
arguments), ``gelus`` (the GELU's forms), ``baselines`` (SiLU, ReLU, ELU, the identity),
``stochastic`` (:func:`soi_map`), ``gated_units`` (the gated linear units and
:data:`GATED_UNITS`) and ``aliases`` (other frameworks' names); every public name is imported
from the package itself (``gelujax.activations.gelu``).
"""

from __future__ import annotations

# The order of these imports is the order the functions enter ACTIVATIONS (a registry's hints
# list close names in it), and the aliases come last: each alias's target must be registered.
from gelujax.activations.registry import ACTIVATIONS, bool_problem, number_problem

# isort: split
from gelujax.activations.gelus import (
  clipped_gelu,
  gaussian_gelu,
  gelu,
  gelu_fast,
  gelu_sigmoid,
  gelu_tanh,
)

# isort: split
from gelujax.activations.baselines import elu, identity, relu, silu

# isort: split
from gelujax.activations.stochastic import soi_map

# isort: split
from gelujax.activations.gated_units import GATED_UNITS, gated, geglu, reglu, swiglu

# isort: split
from gelujax.activations import aliases  # noqa: F401  (registers the aliases)

__all__ = [
  "ACTIVATIONS",
  "GATED_UNITS",
  "bool_problem",
  "clipped_gelu",
  "elu",
  "gated",
  "gaussian_gelu",
  "geglu",
  "gelu",
  "gelu_fast",
  "gelu_sigmoid",
  "gelu_tanh",
  "identity",
  "number_problem",
  "reglu",
  "relu",
  "silu",
  "soi_map",
  "swiglu",
]
