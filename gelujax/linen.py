"""The Flax Linen modules of gelujax's activations; their Flax NNX twins are in
:mod:`gelujax.nnx`, with the same parameters.

- :func:`make_activation`: a spec as the callable a model takes, through
  :func:`gelujax.specs.resolve_activation`, the resolver the NNX twin shares.
- :class:`Activation`: applies an activation (a function, a module class or a spec): the way
  models apply theirs. :class:`SOIMap` is ``soi_map`` as a layer.
- :class:`LearnableGELU`: GELU with a learned gate, registered as ``learnable_gelu``.
- :class:`GatedMLP`: the gated linear units' feed-forward block (Shazeer 2020).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from jax import Array
from jax.typing import ArrayLike

from gelujax.activations import (
  ACTIVATIONS,
  bool_problem,
  gated,
  gaussian_gelu,
  number_problem,
  soi_map,
)
from gelujax.specs import module_activation, resolve_activation

# What modules a Linen module's `activation` may be, as its refusal says.
_MODULES = "a Linen module class (gelujax.LearnableGELU)"


@ACTIVATIONS.register(
  "learnable_gelu",
  check=lambda a: (
    bool_problem(a, "per_feature")
    or number_problem(a, "mu_init")
    or number_problem(a, "sigma_init", positive="the initial standard deviation")
  ),
)
class LearnableGELU(nn.Module):
  r"""GELU with a learned gate: ``gaussian_gelu(x, mu, sigma)`` with ``mu``, ``sigma`` trained.

  ``sigma = exp(log_sigma)`` so it stays positive; both parameters are scalars or, with
  ``per_feature=True``, vectors over the last axis of the input. Its Flax NNX twin,
  :class:`gelujax.nnx.LearnableGELU`, has the same parameters (``nnx.bridge`` maps one to one)
  and computes the same numbers.

  Attributes:
    per_feature: one (mu, sigma) per feature of the last axis instead of a scalar pair.
    mu_init: initial mu.
    sigma_init: initial sigma, > 0.
    dtype: the dtype of the computation; None (default) computes in the input's dtype, the
      parameters cast to it.
    param_dtype: the dtype of the parameters (default float32).
  """

  per_feature: bool = False
  mu_init: float = 0.0
  sigma_init: float = 1.0
  dtype: Any = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: ArrayLike) -> Array:
    if not self.sigma_init > 0:
      raise ValueError(
        f"LearnableGELU(sigma_init={self.sigma_init!r}): sigma_init must be a positive float."
      )
    x = jnp.asarray(x)
    shape = (x.shape[-1],) if self.per_feature else ()
    mu = self.param("mu", nn.initializers.constant(self.mu_init), shape, self.param_dtype)
    log_sigma = self.param(
      "log_sigma", nn.initializers.constant(np.log(self.sigma_init)), shape, self.param_dtype
    )
    if self.dtype is not None:
      x, mu, log_sigma = (jnp.asarray(a, self.dtype) for a in (x, mu, log_sigma))
    # Otherwise computed in x's type (bfloat16 in a mixed-precision model): gaussian_gelu casts
    # mu and sigma to it.
    return gaussian_gelu(x, mu, jnp.exp(log_sigma))


class SOIMap(nn.Module):
  """The stochastic 0-I map (:func:`gelujax.soi_map`) as a layer: a random mask drawn from the
  ``'dropout'`` rng stream unless ``deterministic``, its expectation ``x * Phi(x)`` when it is.
  What :func:`make_activation` gives for ``"soi_map"``."""

  @nn.compact
  def __call__(self, x: ArrayLike, *, deterministic: bool) -> Array:
    key = None if deterministic else self.make_rng("dropout")
    return soi_map(x, key, train=not deterministic)


def make_activation(spec: str) -> Callable[..., Any]:
  """The activation named by ``spec`` as a Linen model's ``activation`` field takes it: a
  function of an array (``"gelu"``, ``"gaussian_gelu(sigma=0.5)"``, an alias, a user's
  ``"module:function"``), or a Linen module class with its arguments bound for an activation
  with parameters or randomness (``"learnable_gelu(per_feature=True)"``, ``"soi_map"``:
  :class:`SOIMap`). Resolved once a process (:func:`gelujax.specs.resolve_activation`).

  Raises:
    ValueError: for a spec that names no activation (saying why).
  """
  name, _, fn = resolve_activation(spec)
  return SOIMap if name == "soi_map" else fn


def _module_class(fn: Any) -> type[nn.Module] | None:
  """The Linen module class ``fn`` makes (itself, or under ``functools.partial``), or None."""
  cls = fn.func if isinstance(fn, functools.partial) else fn
  return cls if isinstance(cls, type) and issubclass(cls, nn.Module) else None


class Activation(nn.Module):
  """Applies an activation: the way models use activations.

  ``activation`` is a function of an array (``gelujax.gelu``, ``jax.nn.relu``), a Linen module
  class (or ``functools.partial`` of one) made into a submodule here, or a spec string that
  :func:`make_activation` resolves (``"gelu"``, ``"learnable_gelu(per_feature=True)"``,
  ``"soi_map"``). Functions are applied directly; a module such as :class:`LearnableGELU` is a
  submodule named after its class (``learnable_gelu``); :class:`SOIMap` draws its mask from the
  ``'dropout'`` rng stream unless deterministic. ``deterministic`` is given as
  ``flax.linen.Dropout`` takes it, as a field or in the call (not both), and only a module whose
  call takes it (``soi_map``) needs it: ``Activation("gelu").apply({}, x)`` is ``gelu(x)``. In
  Flax NNX: :class:`gelujax.nnx.Activation`.

  Attributes:
    activation: a function, a Linen module class, or an activation spec (see
      :func:`gelujax.activation_names` and :func:`gelujax.activation_aliases`); any other
      value is refused in one sentence (a TypeError), when the module is applied.
    deterministic: whether ``soi_map`` is its expectation rather than a random mask; None
      (default) to pass it in the call.
  """

  activation: str | Callable[..., Any]
  deterministic: bool | None = None

  @nn.compact
  def __call__(self, x: ArrayLike, *, deterministic: bool | None = None) -> Array:
    if self.deterministic is not None and deterministic is not None:
      raise ValueError(
        f"Activation({self.activation!r}) got deterministic both as a field and in the call; "
        "pass it once, as for flax.linen.Dropout."
      )
    deterministic = self.deterministic if deterministic is None else deterministic
    name, _, fn = module_activation(
      self.activation, "Activation", modules=_MODULES, module_class=nn.Module
    )
    if name == "soi_map":  # As make_activation gives it.
      fn = SOIMap
    cls = _module_class(fn)
    if cls is None:
      return fn(x)
    layer = fn(name=_snake_case(cls.__name__))
    if "deterministic" not in inspect.signature(cls.__call__).parameters:
      return layer(x)
    if deterministic is None:
      raise ValueError(
        f"Activation({self.activation!r}) draws a random mask unless deterministic; pass "
        "deterministic=True or False, as a field or in the call."
      )
    return layer(x, deterministic=deterministic)


def _snake_case(name: str) -> str:
  """``LearnableGELU`` -> ``learnable_gelu``, ``SOIMap`` -> ``soi_map``."""
  return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class GatedMLP(nn.Module):
  r"""A gated feed-forward block (Shazeer 2020): ``out(value * act(gate))``.

  Computes

  .. math::
    \mathrm{GatedMLP}(x) = \big[(x V + b_V) \odot \mathrm{act}(x W + b_W)\big] \, W_o + b_o

  with one dense layer ``hidden`` of ``2 * hidden_features`` outputs whose first half is the
  value :math:`xV + b_V` and second half the gate :math:`xW + b_W` (the convention of
  :func:`gelujax.gated`), the activation ``activation`` on the gate (module ``gate``), and the dense
  layer ``out``. ``activation="gelu"`` is GEGLU's block, ``"silu"`` SwiGLU's, ``"relu"``
  ReGLU's; any registered activation works, ``learnable_gelu(...)`` and ``soi_map`` included
  (``deterministic`` then as in :class:`Activation`). Shazeer's blocks have no biases
  (``use_bias=False``); Flax's ``Dense`` default, ``True``, is kept here. Its Flax NNX twin is
  :class:`gelujax.nnx.GatedMLP`, with the same parameters.

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_.

  Attributes:
    hidden_features: the width of the value and of the gate.
    out_features: the output's width; None (default) for the input's last axis, as in a
      transformer's feed-forward block.
    activation: the gate's activation, as :class:`Activation` takes it: a function, a module
      class, a spec (see :func:`gelujax.activation_names`) or an alias.
    use_bias: whether the dense layers add biases.
    dtype: the dtype of the computation; None (default) infers it from the input and the
      parameters, as ``flax.linen.Dense`` does.
    param_dtype: the dtype of the dense layers' parameters (default float32).
    kernel_init: the dense layers' kernel initializer (``flax.linen.Dense``'s default).
    bias_init: their bias initializer.
    deterministic: passed to the gate's :class:`Activation` (only ``soi_map`` needs it).
  """

  hidden_features: int
  out_features: int | None = None
  activation: str | Callable[..., Any] = "gelu"
  use_bias: bool = True
  dtype: Any = None
  param_dtype: Any = jnp.float32
  kernel_init: Callable[..., Array] = nn.initializers.lecun_normal()
  bias_init: Callable[..., Array] = nn.initializers.zeros
  deterministic: bool | None = None

  @nn.compact
  def __call__(self, x: ArrayLike, *, deterministic: bool | None = None) -> Array:
    module_activation(self.activation, "GatedMLP", modules=_MODULES, module_class=nn.Module)
    x = jnp.asarray(x)
    dense = functools.partial(
      nn.Dense,
      use_bias=self.use_bias,
      dtype=self.dtype,
      param_dtype=self.param_dtype,
      kernel_init=self.kernel_init,
      bias_init=self.bias_init,
    )
    h = dense(2 * self.hidden_features, name="hidden")(x)
    act = Activation(self.activation, deterministic=self.deterministic, name="gate")
    y = gated(h, functools.partial(act, deterministic=deterministic))
    out_features = x.shape[-1] if self.out_features is None else self.out_features
    return dense(out_features, name="out")(y)
