"""Shazeer's (2020) gated linear units, :func:`gated` with any activation, :func:`geglu`,
:func:`swiglu` and :func:`reglu`, and their registry :data:`GATED_UNITS`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax import Array
from jax.typing import ArrayLike

from gelujax import _gelu_numerics as num
from gelujax.activations.baselines import relu, silu
from gelujax.activations.gelus import gelu
from gelujax.activations.registry import bool_problem
from gelujax.registry import Registry

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
