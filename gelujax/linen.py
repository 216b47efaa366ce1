"""The Flax Linen modules of gelujax's activations; their Flax NNX twins are in
:mod:`gelujax.nnx`, with the same parameters.

- :func:`make_activation`: a spec as the callable a model takes, through
  :func:`gelujax.specs.resolve_activation`, the resolver the NNX twin shares.
- :class:`Activation`: applies an activation (a function, a module class or a spec): the way
  models apply theirs. :class:`SOIMap` is ``soi_map`` as a layer.
- :class:`LearnableGELU`: GELU with a learned gate, registered as ``learnable_gelu``.
- :class:`GatedMLP`: the gated linear units' feed-forward block (Shazeer 2020).
- :class:`TransformerBlock` and :class:`Encoder`: a pre-LayerNorm transformer encoder whose
  feed-forward block (:class:`FeedForward`) takes any activation or a gated linear unit
  (``"geglu"``), the unit at the plain block's parameter count (:func:`gated_hidden_features`).
"""

from __future__ import annotations

import functools
import inspect
import numbers
import re
from collections.abc import Callable
from typing import Any

import jax
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
from gelujax.specs import gated_unit, module_activation, nnx_activation, resolve_activation

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

  A gated linear unit's spec (``"geglu"``, ``"swiglu"``, ...: :func:`gelujax.specs.gated_unit`)
  gives the unit, a function mapping ``2 n`` features to ``n``, which only a model that takes
  units (a transformer's feed-forward: ``takes_gated_units``) accepts.

  Raises:
    ValueError: for a spec that names no activation (saying why).
  """
  unit = gated_unit(spec)
  if unit is not None:
    return unit
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
    # A user's NNX module class comes wrapped for Linen (`gelujax.specs.activation_module`):
    # its layer is named after that class, as gelujax.nnx.Activation names it.
    wrapped = nnx_activation(fn)
    named = wrapped[0] if wrapped else cls
    layer = fn(name=snake_case(named.__name__))
    if "deterministic" not in inspect.signature(cls.__call__).parameters:
      return layer(x)
    if deterministic is None:
      raise ValueError(
        f"Activation({self.activation!r}) draws a random mask unless deterministic; pass "
        "deterministic=True or False, as a field or in the call."
      )
    return layer(x, deterministic=deterministic)


def snake_case(name: str) -> str:
  """``LearnableGELU`` -> ``learnable_gelu``, ``SOIMap`` -> ``soi_map``: the name an activation
  module's layer is kept under, in Linen's `Activation` and NNX's alike."""
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


# --- The transformer: a pre-LayerNorm encoder whose feed-forward block takes any activation,
# a gated linear unit included.


def gated_hidden_features(features: int, hidden_features: int) -> int:
  r"""The width ``g`` of a gated feed-forward block with the parameters of a plain one.

  A plain feed-forward block of width ``h`` between ``d`` features (dense ``d -> h``,
  activation, dense ``h -> d``, with biases) has :math:`2dh + h + d` parameters; a gated one of
  width ``g`` (dense ``d -> 2g``, value and gate, dense ``g -> d``) has
  :math:`d \cdot 2g + 2g + g d + d = (3d + 2) g + d`. ``g`` is the integer whose count is
  nearest the plain one's (the smaller on a tie), which is
  :math:`\mathrm{round}(h (2d + 1) / (3d + 2))`: Shazeer's rule, 2/3 of ``h``, with the biases
  counted, so the two counts differ by at most :math:`(3d + 2) / 2`. With ``d = 64, h = 256``
  the plain block has 33,088 parameters; 2/3 of 256 is 170.67, and ``g = 170`` has 33,044
  (171 would have 33,238).

  Args:
    features: ``d``, the block's input and output width.
    hidden_features: ``h``, the plain block's hidden width.

  Raises:
    ValueError: a width that is no integer >= 1.
  """
  for name, value in (("features", features), ("hidden_features", hidden_features)):
    positive_int_problem("gated_hidden_features", name, value)
  plain = hidden_features * (2 * features + 1)  # Both counts less d: the output bias.
  step = 3 * features + 2  # What one more gated feature adds.
  g = max(1, plain // step)
  return min((g, g + 1), key=lambda w: abs(w * step - plain))


def positive_int_problem(owner: str, name: str, value: Any) -> None:
  """Refuses ``value`` for the size ``name`` of ``owner`` unless it is an integer >= 1."""
  if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
    raise ValueError(f"{owner}({name}={value!r}): {name} must be an integer >= 1.")


def transformer_problems(
  owner: str, features: int, num_heads: int, hidden_features: int, dropout: float
) -> None:
  """Refuses a transformer's sizes and dropout rate, each in one sentence naming the argument,
  the value and what would be valid: the Linen and NNX modules' one check."""
  for name, value in (
    ("features", features),
    ("num_heads", num_heads),
    ("hidden_features", hidden_features),
  ):
    positive_int_problem(owner, name, value)
  if features % num_heads:
    divisors = [k for k in range(1, features + 1) if features % k == 0]
    raise ValueError(
      f"{owner}(num_heads={num_heads!r}): num_heads must divide the {features} features, each "
      f"head taking features / num_heads of them; one of {', '.join(map(str, divisors))}."
    )
  if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0 <= dropout < 1:
    raise ValueError(
      f"{owner}(dropout={dropout!r}): dropout is the residual branches' drop rate, a number in "
      "[0, 1)."
    )


def keeps_width(owner: str, activation: Any, module_class: type) -> None:
  """Refuses a function ``activation`` that changes the width of its input's last axis, as a
  gated linear unit that is not one of :func:`gelujax.specs.gated_unit`'s does: the block
  would size its layers for an element-wise activation. Specs (checked when resolved) and
  modules (``module_class`` instances and classes) are left to their own checks, as is a
  function that cannot be traced on a float32 ``[1, 6]`` input."""
  made = activation.func if isinstance(activation, functools.partial) else activation
  if isinstance(activation, str | module_class) or isinstance(made, type):
    return
  probe = jax.ShapeDtypeStruct((1, 6), jnp.float32)
  try:
    shape = jax.eval_shape(activation, probe).shape
  except Exception:  # Not a function of one array: the call says why.
    return
  if shape != probe.shape:
    raise ValueError(
      f"{owner} got activation={activation!r}, which maps an input of shape {probe.shape} to "
      f"{shape}; an activation keeps its input's shape, and a gated linear unit of one's own is "
      "functools.partial(gelujax.gated, activation=<the gate's activation>)."
    )


def padding_mask(owner: str, x: Array, mask: ArrayLike | None) -> Array | None:
  """The attention mask of a padding mask: query and key both real tokens
  (``nn.make_attention_mask(mask, mask)``, ``[batch, 1, length, length]``), so a padded position
  never reaches a real one; None without one. Refuses an input that is no
  ``[batch, length, features]`` and a mask that is no boolean ``[batch, length]``."""
  if x.ndim != 3:
    raise ValueError(
      f"{owner} got an input of shape {x.shape}; it takes [batch, length, features]."
    )
  if mask is None:
    return None
  mask = jnp.asarray(mask)
  if mask.shape != x.shape[:2] or mask.dtype != jnp.bool_:
    raise ValueError(
      f"{owner} got a mask of shape {mask.shape} and dtype {mask.dtype} for an input of shape "
      f"{x.shape}; the mask must be boolean [batch, length] = {x.shape[:2]}, True for a real "
      "token."
    )
  return nn.make_attention_mask(mask, mask)


def attention_mask(owner: str, x: Array, mask: ArrayLike | None, causal: bool) -> Array | None:
  """A block's attention mask: :func:`padding_mask`'s, and with ``causal`` a position attends
  only to itself and the positions before it (``nn.make_causal_mask``), so that no later token
  changes an earlier position's output (a decoder, as in GPT)."""
  padding = padding_mask(owner, x, mask)
  if not causal:
    return padding
  return nn.combine_masks(padding, nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.bool_)))


class FeedForward(nn.Module):
  """A transformer's feed-forward block: dense ``hidden``, the activation, dense ``out``.

  For an element-wise activation (a function, a Linen module class or a spec, as
  :class:`Activation` takes it, applied by the :class:`Activation` ``act``), ``hidden`` has
  ``hidden_features`` outputs. For a gated linear unit (:func:`gelujax.specs.gated_unit`:
  ``"geglu"``, ``"swiglu"``, ``"reglu"``, ``"gated(activation=...)"`` or the functions) it has
  ``2 * g`` outputs, the value then the gate (:func:`gelujax.gated`'s convention), which the unit
  maps to ``g``, with ``g = gated_hidden_features(d, hidden_features)``: the plain block's
  parameter count, to within the rounding of ``g`` (:func:`gated_hidden_features`), so that
  activations are compared at equal size. ``out`` maps back to the input's width ``d``. The
  parameters are :class:`GatedMLP`'s (``hidden``, ``out``) for a unit. Its Flax NNX twin is
  :class:`gelujax.nnx.FeedForward`.

  Attributes:
    hidden_features: the plain block's hidden width ``h``.
    activation: an element-wise activation or a gated linear unit.
    dtype: the dtype of the computation; None (default) infers it, as ``flax.linen.Dense``.
    param_dtype: the dtype of the dense layers' parameters (default float32).
  """

  hidden_features: int
  activation: str | Callable[..., Any] = "gelu"
  dtype: Any = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: ArrayLike, *, deterministic: bool = True) -> Array:
    x = jnp.asarray(x)
    unit = gated_unit(self.activation)
    dense = functools.partial(nn.Dense, dtype=self.dtype, param_dtype=self.param_dtype)
    if unit is None:
      module_activation(self.activation, "FeedForward", modules=_MODULES, module_class=nn.Module)
      keeps_width("FeedForward", self.activation, nn.Module)
      h = dense(self.hidden_features, name="hidden")(x)
      h = Activation(self.activation, name="act")(h, deterministic=deterministic)
    else:
      width = gated_hidden_features(x.shape[-1], self.hidden_features)
      h = unit(dense(2 * width, name="hidden")(x))
    return dense(x.shape[-1], name="out")(h)


class TransformerBlock(nn.Module):
  """A pre-LayerNorm transformer encoder block, with any activation in its feed-forward block.

  Computes, on ``x`` of shape ``[batch, length, features]``,

  - ``x = x + Dropout(Attention(LayerNorm(x), mask))``: ``attention_norm``, then ``attention``,
    Flax's ``MultiHeadDotProductAttention`` (self-attention, ``num_heads`` heads of
    ``features / num_heads``, no dropout on the attention weights);
  - ``x = x + Dropout(FeedForward(LayerNorm(x)))``: ``mlp_norm``, then ``mlp``, a
    :class:`FeedForward` of ``hidden_features`` for an element-wise activation, or, for a gated
    linear unit (``"geglu"``, ``"swiglu"``), of the width with the same parameter count
    (:func:`gated_hidden_features`: Shazeer's 2/3 rule with the biases counted).

  The norms come first (pre-LN, as in GPT-2 and ViT), so the residual stream is a sum of the
  branches and trains without warmup tricks. ``mask``, ``[batch, length]`` booleans (True: a
  real token), masks attention to and from padded positions (:func:`padding_mask`), so their
  values never change a real position's output; with ``causal``, each position attends only to
  itself and those before it (a decoder block, :func:`attention_mask`). Dropout (rate
  ``dropout``, rng stream ``'dropout'``) on both branches is active only when
  ``deterministic=False``. With a ``dtype`` the input is cast to it, and the block computes and
  returns it (bfloat16 for mixed precision); parameters stay ``param_dtype``. The parameters are
  those of its Flax NNX twin, :class:`gelujax.nnx.TransformerBlock`.

  Attributes:
    num_heads: the attention heads; they must divide the features.
    hidden_features: the plain feed-forward block's hidden width ``h`` (``4 * features`` is
      usual).
    activation: the feed-forward block's: an element-wise activation as :class:`Activation`
      takes it (``"gelu"``, ``"gelu_tanh"``, ``"gelu(approximate=True)"``, a user's
      ``"module:function"``, a function, a Linen module class) or a gated linear unit
      (:func:`gelujax.specs.gated_unit`).
    dropout: the drop rate of both residual branches, in [0, 1).
    dtype: the dtype of the computation; None (default) infers it from the input and the
      parameters, as Flax's modules do.
    param_dtype: the dtype of the parameters (default float32).
    causal: whether a position attends only to itself and the positions before it.
  """

  num_heads: int
  hidden_features: int
  activation: str | Callable[..., Any] = "gelu"
  dropout: float = 0.0
  dtype: Any = None
  param_dtype: Any = jnp.float32
  causal: bool = False

  @nn.compact
  def __call__(
    self, x: ArrayLike, mask: ArrayLike | None = None, *, deterministic: bool = True
  ) -> Array:
    x = jnp.asarray(x, self.dtype)
    mask_ = attention_mask("TransformerBlock", x, mask, self.causal)
    transformer_problems(
      "TransformerBlock", x.shape[-1], self.num_heads, self.hidden_features, self.dropout
    )
    typed = {"dtype": self.dtype, "param_dtype": self.param_dtype}
    y = nn.LayerNorm(**typed, name="attention_norm")(x)
    y = nn.MultiHeadDotProductAttention(self.num_heads, **typed, name="attention")(y, mask=mask_)
    x = x + nn.Dropout(self.dropout)(y, deterministic=deterministic)
    y = nn.LayerNorm(**typed, name="mlp_norm")(x)
    y = FeedForward(self.hidden_features, self.activation, **typed, name="mlp")(
      y, deterministic=deterministic
    )
    return x + nn.Dropout(self.dropout)(y, deterministic=deterministic)


class Encoder(nn.Module):
  """A pre-LayerNorm transformer encoder: ``num_layers`` :class:`TransformerBlock` s
  (``block_0``, ``block_1``, ...), then a LayerNorm, ``final_norm`` (a pre-LN stack's residual
  stream is never normalised otherwise).

  ``x`` is ``[batch, length, features]`` (already embedded: the encoder is the blocks, not
  the embedding or the output head); ``mask``, ``[batch, length]`` booleans (True: a real
  token), keeps padded positions from changing the real ones'. Dropout, dtype and parameters
  as in :class:`TransformerBlock`. Its Flax NNX twin is :class:`gelujax.nnx.Encoder`, with the
  same parameters.

  Attributes:
    num_layers: the blocks, >= 1.
    num_heads: each block's attention heads; they must divide the features.
    hidden_features: the plain feed-forward blocks' hidden width.
    activation: the feed-forward blocks' activation or gated linear unit.
    dropout: the drop rate of every residual branch, in [0, 1).
    dtype: the dtype of the computation; None (default) infers it.
    param_dtype: the dtype of the parameters (default float32).
    causal: whether each block is a decoder's (:class:`TransformerBlock`).
  """

  num_layers: int
  num_heads: int
  hidden_features: int
  activation: str | Callable[..., Any] = "gelu"
  dropout: float = 0.0
  dtype: Any = None
  param_dtype: Any = jnp.float32
  causal: bool = False

  @nn.compact
  def __call__(
    self, x: ArrayLike, mask: ArrayLike | None = None, *, deterministic: bool = True
  ) -> Array:
    positive_int_problem("Encoder", "num_layers", self.num_layers)
    x = jnp.asarray(x, self.dtype)
    padding_mask("Encoder", x, mask)  # Refused here, naming the encoder.
    transformer_problems("Encoder", x.shape[-1], self.num_heads, self.hidden_features,
                         self.dropout)  # fmt: skip
    typed = {"dtype": self.dtype, "param_dtype": self.param_dtype}
    for i in range(self.num_layers):
      block = TransformerBlock(
        self.num_heads, self.hidden_features, self.activation, self.dropout, **typed,
        causal=self.causal, name=f"block_{i}",
      )  # fmt: skip
      x = block(x, mask, deterministic=deterministic)
    return nn.LayerNorm(**typed, name="final_norm")(x)
