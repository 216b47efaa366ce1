"""Flax NNX modules: :class:`Activation`, :class:`LearnableGELU`, :class:`GatedMLP`, and a
pre-LayerNorm transformer encoder, :class:`TransformerBlock` and :class:`Encoder`, whose
feed-forward block (:class:`FeedForward`) takes any activation or a gated linear unit.

The same modules as the Flax Linen ones in :mod:`gelujax.linen`, written the way Flax now
teaches (``nnx.Module``: parameters are created when the module is, and held by it), for models
written in NNX. Parameter names and shapes are the Linen modules', and so are the initial values
of those that are constants (drawn ones come from other streams), so
``nnx.bridge.ToNNX`` and ``nnx.bridge.ToLinen`` map one to the other one to one
(``ToLinen(LearnableGELU, ..., skip_rng=True)``: its initial values are constants, it draws no
random numbers). The training engine's own models stay Linen: they are applied as pure
functions of parameter pytrees that are vmapped over members and sharded over the mesh.

Example::

  >>> import jax.numpy as jnp
  >>> from flax import nnx
  >>> import gelujax.nnx
  >>> class MLP(nnx.Module):
  ...   def __init__(self, rngs: nnx.Rngs):
  ...     self.linear = nnx.Linear(3, 4, rngs=rngs)
  ...     self.act = gelujax.nnx.LearnableGELU(4)  # one (mu, sigma) per feature
  ...   def __call__(self, x):
  ...     return self.act(self.linear(x))
  >>> model = MLP(nnx.Rngs(0))
  >>> model(jnp.ones((2, 3))).shape
  (2, 4)
  >>> nnx.state(model.act)['mu'].shape
  (4,)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import linen, nnx
from jax import Array
from jax.typing import ArrayLike, DTypeLike

from gelujax.activations import gated, gaussian_gelu
from gelujax.linen import (
  attention_mask,
  gated_hidden_features,
  keeps_width,
  padding_mask,
  positive_int_problem,
  snake_case,
  transformer_problems,
)
from gelujax.specs import gated_unit, module_activation

# What modules an NNX module's `activation` may be, as its refusal says.
_MODULES = "an nnx.Module instance (gelujax.nnx.LearnableGELU(4))"

# nnx.Linear's defaults, which GatedMLP keeps.
_KERNEL_INIT = nnx.initializers.lecun_normal()
_BIAS_INIT = nnx.initializers.zeros_init()


class LearnableGELU(nnx.Module):
  r"""GELU with a learned gate: ``gaussian_gelu(x, mu, sigma)`` with ``mu``, ``sigma`` trained.

  Computes :math:`x \, \Phi((x - \mu) / \sigma)` with :math:`\sigma = \exp(\mathrm{log\_sigma})`,
  so sigma stays positive under any update. The parameters are ``mu`` and ``log_sigma``
  (``nnx.Param``), scalars or, given ``num_features``, vectors over the input's last axis:
  the names, shapes and initial values of the Linen :class:`gelujax.LearnableGELU`
  (``per_feature=True`` there is ``num_features`` here, which NNX needs up front).

  Args:
    num_features: the size of the input's last axis for one (mu, sigma) per feature; None
      (default) for one scalar pair.
    mu_init: initial mu.
    sigma_init: initial sigma, > 0.
    dtype: the dtype of the computation; None (default) computes in the input's dtype, the
      parameters cast to it.
    param_dtype: the dtype of the parameters (default float32).

  Examples:
    >>> LearnableGELU(mu_init=0.5, sigma_init=2.0)(jnp.array([-1.0, 0.0, 1.0, 2.0]))
    Array([-0.22662736,  0.        ,  0.59870636,  1.5467453 ], dtype=float32)
  """

  def __init__(
    self,
    num_features: int | None = None,
    *,
    mu_init: float = 0.0,
    sigma_init: float = 1.0,
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
  ):
    if not sigma_init > 0:
      raise ValueError(
        f"LearnableGELU(sigma_init={sigma_init!r}): sigma_init must be a positive float."
      )
    if num_features is not None and not (isinstance(num_features, int) and num_features >= 1):
      raise ValueError(
        f"LearnableGELU(num_features={num_features!r}): expected an integer >= 1, or None for "
        "scalar parameters."
      )
    shape = () if num_features is None else (num_features,)
    self.mu = nnx.Param(jnp.full(shape, mu_init, param_dtype))
    self.log_sigma = nnx.Param(jnp.full(shape, np.log(sigma_init), param_dtype))
    self.num_features = num_features
    self.dtype = dtype
    self.param_dtype = param_dtype

  def __call__(self, x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    if self.num_features is not None and x.shape[-1:] != (self.num_features,):
      raise ValueError(
        f"LearnableGELU(num_features={self.num_features}) got an input of shape {x.shape}; "
        f"its last axis must have {self.num_features} features."
      )
    mu, log_sigma = self.mu[...], self.log_sigma[...]
    if self.dtype is not None:
      x, mu, log_sigma = (jnp.asarray(a, self.dtype) for a in (x, mu, log_sigma))
    # Otherwise as the Linen module: gaussian_gelu casts mu and sigma to x's dtype.
    return gaussian_gelu(x, mu, jnp.exp(log_sigma))


def _user_module(activation: Any, entry: Any, rngs: nnx.Rngs | nnx.RngStream | None) -> Any:
  """A user's activation module class named by a spec (`gelujax.specs.activation_module`)
  made into its NNX module: an NNX class constructed with the spec's arguments and ``rngs``;
  a Linen class is refused (its parameters live in Linen's variables); anything else as it is."""
  made = entry.func if isinstance(entry, functools.partial) else entry
  if made is nnx.bridge.ToLinen:
    cls, kwargs = entry.args[0], entry.keywords.get("kwargs", {})
    if not isinstance(rngs, nnx.Rngs):
      raise ValueError(
        f"Activation({activation!r}) is an NNX module class with parameters; pass rngs (an "
        "nnx.Rngs) to construct it."
      )
    return cls(**kwargs, rngs=rngs)
  if isinstance(made, type) and issubclass(made, linen.Module):
    raise ValueError(
      f"Activation({activation!r}) is a Linen module class; gelujax.nnx models take an NNX "
      "module class (flax.nnx.Module) or a function, and gelujax.linen models a Linen one."
    )
  return entry


class Activation(nnx.Module):
  """Applies an activation, as the Linen :class:`gelujax.Activation` does.

  ``activation`` is a function of an array (``gelujax.gelu``, ``jax.nn.relu``), an
  ``nnx.Module`` made beforehand (``gelujax.nnx.LearnableGELU(4)``), or a spec string
  (``"gelu"``, ``"learnable_gelu(per_feature=True)"``, ``"soi_map"``, an alias). Functions are
  applied directly. A module is a submodule named after its class, as the Linen module names the
  module class it is given (``LearnableGELU`` -> ``learnable_gelu``), so ``nnx.bridge`` maps
  one's parameters to the other's; ``"learnable_gelu(...)"`` creates that :class:`LearnableGELU`
  submodule (its ``per_feature=True`` needs ``num_features``). ``"soi_map"`` draws its mask from
  the ``rngs`` stream ``rng_collection`` when not deterministic and is ``x * Phi(x)`` when
  deterministic. Like ``nnx.Dropout``, ``deterministic`` is set at construction, by
  ``model.train()`` / ``model.eval()`` or ``nnx.view(model, deterministic=...)``, or per call
  (the call's value wins); it matters only to ``soi_map`` (and, with ``rngs``, is passed to a
  module whose call takes it).

  Args:
    activation: a function, an ``nnx.Module``, or an activation name with optional keyword
      literals or another framework's alias (see :func:`gelujax.activation_names`,
      :func:`gelujax.activation_aliases`).
    num_features: the input's last axis, for ``learnable_gelu(per_feature=True)``.
    deterministic: whether ``soi_map`` is its expectation rather than a random mask.
    rng_collection: the ``nnx.Rngs`` stream ``soi_map``'s masks are drawn from.
    rngs: the random streams, needed for ``soi_map`` unless passed to each call.
    dtype: the dtype of the computation; None (default) computes in the input's dtype.
    param_dtype: the dtype of ``learnable_gelu``'s parameters (default float32).

  Raises:
    TypeError: an ``activation`` that is no function, module or spec (a number, a class).
    ValueError: for an unknown spec (saying what was likely meant) or arguments it does not
      take.
  """

  def __init__(
    self,
    activation: str | Callable[..., Any],
    *,
    num_features: int | None = None,
    deterministic: bool | None = False,
    rng_collection: str = "dropout",
    rngs: nnx.Rngs | nnx.RngStream | None = None,
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
  ):
    # Checks the value, the spec's name and its arguments.
    self.name, kwargs, entry = module_activation(activation, "Activation", modules=_MODULES)
    kwargs = dict(kwargs)
    self.spec = activation if isinstance(activation, str) else None
    self.deterministic, self.dtype = deterministic, dtype
    self.fn, self.submodule = entry, None
    if self.name == "learnable_gelu":  # A submodule, whose parameters NNX creates now.
      per_feature = kwargs.pop("per_feature", False)
      if per_feature and num_features is None:
        raise ValueError(
          f"Activation({activation!r}) has one (mu, sigma) per feature; pass num_features, the "
          "size of the input's last axis."
        )
      entry = LearnableGELU(
        num_features if per_feature else None, **kwargs, dtype=dtype, param_dtype=param_dtype
      )
    entry = _user_module(activation, entry, rngs)
    if isinstance(entry, nnx.Module):
      self.submodule, self.fn = snake_case(type(entry).__name__), None
      if hasattr(self, self.submodule):
        raise ValueError(
          f"Activation({activation!r}): a module is kept under its class's name, and "
          f"{self.submodule!r} is an attribute of Activation itself; rename the class."
        )
      setattr(self, self.submodule, entry)
    self.rng_collection = rng_collection
    if isinstance(rngs, nnx.Rngs):
      rngs = rngs[rng_collection]
    self.rngs = nnx.data(rngs.fork() if rngs is not None else None)

  def __call__(
    self,
    x: ArrayLike,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    x = jnp.asarray(x, self.dtype)
    if self.submodule is not None:
      module = getattr(self, self.submodule)
      takes = inspect.signature(type(module).__call__).parameters
      given = {"deterministic": deterministic, "rngs": rngs}
      return module(x, **{k: v for k, v in given.items() if v is not None and k in takes})
    if self.name != "soi_map":
      return self.fn(x)
    deterministic = self.deterministic if deterministic is None else deterministic
    if deterministic is None:
      raise ValueError(
        f"Activation({self.spec!r}) needs deterministic=True or False: at construction, by "
        "model.train() / model.eval(), or in the call."
      )
    return self.fn(x, None if deterministic else self._key(rngs), train=not deterministic)

  def set_view(self, deterministic: bool | None = None):
    """``nnx.view``'s hook: ``deterministic`` as for ``nnx.Dropout``."""
    if deterministic is not None:
      self.deterministic = deterministic

  def _key(self, rngs: Any) -> Array:
    """A key for soi_map's mask: from the call's ``rngs`` if given, else the module's stream."""
    rngs = self.rngs if rngs is None else rngs
    if rngs is None:
      raise ValueError(
        f"Activation({self.spec!r}) draws a random mask when not deterministic; pass rngs "
        "(an nnx.Rngs) at construction or in the call."
      )
    if isinstance(rngs, nnx.Rngs):
      return rngs[self.rng_collection]()
    return rngs() if isinstance(rngs, nnx.RngStream) else rngs


class GatedMLP(nnx.Module):
  r"""A gated feed-forward block (Shazeer 2020): ``out(value * act(gate))``.

  Computes :math:`[(xV + b_V) \odot \mathrm{act}(xW + b_W)] W_o + b_o` with one
  ``nnx.Linear`` ``hidden`` of ``2 * hidden_features`` outputs, whose first half is the value
  and second half the gate (:func:`gelujax.gated`'s convention), the :class:`Activation`
  ``gate`` and the ``nnx.Linear`` ``out``: the parameters, names and numbers of the Linen
  :class:`gelujax.GatedMLP`. ``activation="gelu"`` is GEGLU's block, ``"silu"`` SwiGLU's,
  ``"relu"`` ReGLU's; any registered activation works, ``learnable_gelu(...)`` (with one
  (mu, sigma) per hidden feature when ``per_feature=True``) and ``soi_map`` included
  (``deterministic`` and ``rngs`` then as in :class:`Activation`).

  For more information, see `GLU Variants Improve Transformer
  <https://arxiv.org/abs/2002.05202>`_.

  Args:
    in_features: the input's last axis.
    hidden_features: the width of the value and of the gate.
    out_features: the output's width; None (default) for ``in_features``.
    activation: the gate's activation, as :class:`Activation` takes it: a function, an
      ``nnx.Module``, a spec (see :func:`gelujax.activation_names`) or an alias.
    use_bias: whether the linear layers add biases (Shazeer's have none).
    dtype: the dtype of the computation; None (default) infers it, as ``nnx.Linear`` does.
    param_dtype: the dtype of the linear layers' parameters (default float32).
    kernel_init: the linear layers' kernel initializer (``nnx.Linear``'s default).
    bias_init: their bias initializer.
    deterministic: the gate's, for ``soi_map``.
    rngs: the random streams: the parameters' initial values, and ``soi_map``'s masks.

  Examples:
    >>> from flax import nnx
    >>> block = GatedMLP(4, 6, activation="gelu", rngs=nnx.Rngs(0))
    >>> block(jnp.ones((2, 4))).shape
    (2, 4)
    >>> block.hidden.kernel.shape  # value and gate: 2 x 6 columns
    (4, 12)
  """

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    out_features: int | None = None,
    *,
    activation: str | Callable[..., Any] = "gelu",
    use_bias: bool = True,
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
    kernel_init: Callable[..., Array] = _KERNEL_INIT,
    bias_init: Callable[..., Array] = _BIAS_INIT,
    deterministic: bool | None = False,
    rngs: nnx.Rngs,
  ):
    module_activation(activation, "GatedMLP", modules=_MODULES)  # Refused before any work.
    linear = functools.partial(
      nnx.Linear,
      use_bias=use_bias,
      dtype=dtype,
      param_dtype=param_dtype,
      kernel_init=kernel_init,
      bias_init=bias_init,
      rngs=rngs,
    )
    self.hidden = linear(in_features, 2 * hidden_features)
    self.gate = Activation(
      activation, num_features=hidden_features, deterministic=deterministic, rngs=rngs
    )
    self.out = linear(hidden_features, in_features if out_features is None else out_features)

  def __call__(
    self,
    x: ArrayLike,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    gate = functools.partial(self.gate, deterministic=deterministic, rngs=rngs)
    return self.out(gated(self.hidden(x), gate))


class FeedForward(nnx.Module):
  """A transformer's feed-forward block: ``nnx.Linear`` ``hidden``, the activation, ``out``.

  The Linen :class:`gelujax.linen.FeedForward`'s parameters and numbers: for an element-wise
  activation (applied by the :class:`Activation` ``act``), ``hidden`` has ``hidden_features``
  outputs; for a gated linear unit (:func:`gelujax.specs.gated_unit`: ``"geglu"``,
  ``"swiglu"``, ``"reglu"``, ``"gated(activation=...)"`` or the functions), ``2 * g``, value
  then gate, with ``g = gated_hidden_features(in_features, hidden_features)``, the width at the
  plain block's parameter count (:func:`gelujax.linen.gated_hidden_features`). ``out`` maps
  back to ``in_features``.

  Args:
    in_features: the input's and the output's width ``d``.
    hidden_features: the plain block's hidden width ``h``.
    activation: an element-wise activation, as :class:`Activation` takes it, or a gated linear
      unit.
    dtype: the dtype of the computation; None (default) infers it, as ``nnx.Linear`` does.
    param_dtype: the dtype of the linear layers' parameters (default float32).
    deterministic: the activation's, for ``soi_map``.
    rngs: the random streams: the parameters' initial values, and ``soi_map``'s masks.
  """

  def __init__(
    self,
    in_features: int,
    hidden_features: int,
    *,
    activation: str | Callable[..., Any] = "gelu",
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
    deterministic: bool | None = False,
    rngs: nnx.Rngs,
  ):
    for name, value in (("in_features", in_features), ("hidden_features", hidden_features)):
      positive_int_problem("FeedForward", name, value)
    self.unit = gated_unit(activation)
    if self.unit is None:
      keeps_width("FeedForward", activation, nnx.Module)
    linear = functools.partial(nnx.Linear, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
    if self.unit is None:
      width = hidden_features
      self.act = Activation(activation, num_features=width, deterministic=deterministic, rngs=rngs)
      self.hidden = linear(in_features, width)
    else:
      width = gated_hidden_features(in_features, hidden_features)
      self.act = None
      self.hidden = linear(in_features, 2 * width)
    self.out = linear(width, in_features)

  def __call__(
    self,
    x: ArrayLike,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    h = self.hidden(x)
    if self.unit is not None:
      return self.out(self.unit(h))
    return self.out(self.act(h, deterministic=deterministic, rngs=rngs))


class TransformerBlock(nnx.Module):
  """A pre-LayerNorm transformer encoder block, with any activation in its feed-forward block.

  The Linen :class:`gelujax.linen.TransformerBlock` in NNX, with its parameters (names and
  shapes) and numbers: on ``x`` of shape ``[batch, length, in_features]``,
  ``x = x + Dropout(attention(attention_norm(x), mask))``, then
  ``x = x + Dropout(mlp(mlp_norm(x)))``, with ``nnx.LayerNorm`` s, ``nnx.MultiHeadAttention``
  (self-attention, ``num_heads`` heads, no dropout on the attention weights, no decoding cache)
  and a :class:`FeedForward` ``mlp`` (for a gated linear unit, of the width with the plain
  block's parameter count). ``mask``, ``[batch, length]`` booleans (True: a real token), keeps
  padded positions from changing the real ones'. The two ``nnx.Dropout`` s (rate ``dropout``)
  follow its conventions: ``deterministic`` set at construction, by ``model.train()`` /
  ``model.eval()`` or per call, their masks drawn from ``rngs``' ``'dropout'`` stream (or
  ``'default'``). With a ``dtype`` the input is cast to it, and the block computes and returns
  it; parameters stay ``param_dtype``.

  Args:
    in_features: the input's and the output's width; ``num_heads`` must divide it.
    num_heads: the attention heads.
    hidden_features: the plain feed-forward block's hidden width ``h``.
    activation: the feed-forward block's: an element-wise activation as :class:`Activation`
      takes it or a gated linear unit (:func:`gelujax.specs.gated_unit`).
    dropout: the drop rate of both residual branches, in [0, 1).
    dtype: the dtype of the computation; None (default) infers it, as Flax's modules do.
    param_dtype: the dtype of the parameters (default float32).
    deterministic: whether dropout (and ``soi_map``) is off, as for ``nnx.Dropout``.
    causal: whether a position attends only to itself and those before it (a decoder).
    rngs: the random streams: the parameters' initial values and the dropout masks.

  Examples:
    >>> from flax import nnx
    >>> block = TransformerBlock(8, 2, 32, activation="geglu", rngs=nnx.Rngs(0))
    >>> block(jnp.ones((1, 5, 8)), jnp.array([[True] * 3 + [False] * 2])).shape
    (1, 5, 8)
    >>> block.mlp.hidden.kernel.shape  # 21 gated features: 2 x 21 columns
    (8, 42)
  """

  def __init__(
    self,
    in_features: int,
    num_heads: int,
    hidden_features: int,
    *,
    activation: str | Callable[..., Any] = "gelu",
    dropout: float = 0.0,
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
    deterministic: bool | None = False,
    causal: bool = False,
    rngs: nnx.Rngs,
  ):
    transformer_problems("TransformerBlock", in_features, num_heads, hidden_features, dropout)
    self.in_features, self.dtype, self.causal = in_features, dtype, causal
    typed = {"dtype": dtype, "param_dtype": param_dtype, "rngs": rngs}
    self.attention_norm = nnx.LayerNorm(in_features, **typed)
    self.attention = nnx.MultiHeadAttention(
      num_heads, in_features, decode=False, keep_rngs=False, **typed
    )
    self.attention_dropout = nnx.Dropout(dropout, deterministic=deterministic, rngs=rngs)
    self.mlp_norm = nnx.LayerNorm(in_features, **typed)
    self.mlp = FeedForward(
      in_features, hidden_features, activation=activation, deterministic=deterministic, **typed
    )
    self.mlp_dropout = nnx.Dropout(dropout, deterministic=deterministic, rngs=rngs)

  def __call__(
    self,
    x: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    x = _features(self, "TransformerBlock", x)
    mask_ = attention_mask("TransformerBlock", x, mask, self.causal)
    y = self.attention(self.attention_norm(x), mask=mask_, deterministic=True)
    x = x + self.attention_dropout(y, deterministic=deterministic, rngs=rngs)
    y = self.mlp(self.mlp_norm(x), deterministic=deterministic, rngs=rngs)
    return x + self.mlp_dropout(y, deterministic=deterministic, rngs=rngs)


class Encoder(nnx.Module):
  """A pre-LayerNorm transformer encoder: ``num_layers`` :class:`TransformerBlock` s
  (``block_0``, ``block_1``, ...), then the ``nnx.LayerNorm`` ``final_norm``.

  The Linen :class:`gelujax.linen.Encoder` in NNX, with its parameters (the blocks are
  attributes ``block_<i>``, not a list, so that their names are the Linen module's) and
  numbers. ``x`` is ``[batch, length, in_features]``; ``mask``, ``[batch, length]`` booleans
  (True: a real token). Dropout, dtype and parameters as in :class:`TransformerBlock`.

  Args:
    in_features: the input's and the output's width; ``num_heads`` must divide it.
    num_layers: the blocks, >= 1.
    num_heads: each block's attention heads.
    hidden_features: the plain feed-forward blocks' hidden width.
    activation: the feed-forward blocks' activation or gated linear unit.
    dropout: the drop rate of every residual branch, in [0, 1).
    dtype: the dtype of the computation; None (default) infers it.
    param_dtype: the dtype of the parameters (default float32).
    deterministic: whether dropout (and ``soi_map``) is off, as for ``nnx.Dropout``.
    causal: whether a position attends only to itself and those before it (a decoder).
    rngs: the random streams: the parameters' initial values and the dropout masks.
  """

  def __init__(
    self,
    in_features: int,
    num_layers: int,
    num_heads: int,
    hidden_features: int,
    *,
    activation: str | Callable[..., Any] = "gelu",
    dropout: float = 0.0,
    dtype: DTypeLike | None = None,
    param_dtype: DTypeLike = jnp.float32,
    deterministic: bool | None = False,
    causal: bool = False,
    rngs: nnx.Rngs,
  ):
    positive_int_problem("Encoder", "num_layers", num_layers)
    transformer_problems("Encoder", in_features, num_heads, hidden_features, dropout)
    self.in_features, self.num_layers, self.dtype = in_features, num_layers, dtype
    for i in range(num_layers):
      block = TransformerBlock(
        in_features, num_heads, hidden_features, activation=activation, dropout=dropout,
        dtype=dtype, param_dtype=param_dtype, deterministic=deterministic, causal=causal,
        rngs=rngs,
      )  # fmt: skip
      setattr(self, f"block_{i}", block)
    self.final_norm = nnx.LayerNorm(in_features, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

  def __call__(
    self,
    x: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    x = _features(self, "Encoder", x)
    padding_mask("Encoder", x, mask)  # Refused here, naming the encoder.
    for i in range(self.num_layers):
      x = getattr(self, f"block_{i}")(x, mask, deterministic=deterministic, rngs=rngs)
    return self.final_norm(x)


class CharGPT(nnx.Module):
  """A character-level GPT in NNX: the Linen :class:`gelujax.models.CharGPT` (the model the
  engine trains as ``char_lm``), with its parameters (``embed``, ``position``, ``decoder``) and
  numbers: character ids ``[batch, length]`` -> next-character logits ``[batch, length,
  vocab_size]``, ``length`` at most ``block_size``. The character table ``embed`` (N(0, 0.02))
  plus a learned position (``position``, N(0, 0.02)); :class:`Encoder` with ``causal=True``; the
  logits from the same table (the head tied to the embedding).

  Args:
    vocab_size: the characters.
    block_size: the longest window (rows of ``position``).
    width, depth, num_heads, hidden_features: as :class:`Encoder` takes them.
    activation: the feed-forward's activation or gated linear unit.
    dropout: the drop rate of the embedding and of every residual branch, in [0, 1).
    dtype: the dtype of the blocks' computation (parameters float32; logits float32).
    deterministic: whether dropout is off, as for ``nnx.Dropout``.
    rngs: the random streams.

  Examples:
    >>> from flax import nnx
    >>> model = CharGPT(65, 8, width=16, depth=1, num_heads=2, hidden_features=64,
    ...                 rngs=nnx.Rngs(0))
    >>> model(jnp.zeros((2, 8), jnp.int32)).shape
    (2, 8, 65)
  """

  def __init__(
    self,
    vocab_size: int,
    block_size: int,
    *,
    width: int = 128,
    depth: int = 4,
    num_heads: int = 4,
    hidden_features: int = 512,
    activation: str | Callable[..., Any] = "gelu",
    dropout: float = 0.0,
    dtype: DTypeLike | None = None,
    deterministic: bool | None = False,
    rngs: nnx.Rngs,
  ):
    positive_int_problem("CharGPT", "vocab_size", vocab_size)
    positive_int_problem("CharGPT", "block_size", block_size)
    self.block_size, self.dtype = block_size, dtype
    self.embed = nnx.Embed(
      vocab_size, width, embedding_init=nnx.initializers.normal(0.02), rngs=rngs
    )
    self.position = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (1, block_size, width)))
    self.dropout = nnx.Dropout(dropout, deterministic=deterministic, rngs=rngs)
    self.decoder = Encoder(
      width, depth, num_heads, hidden_features, activation=activation, dropout=dropout,
      dtype=dtype, deterministic=deterministic, causal=True, rngs=rngs,
    )  # fmt: skip

  def __call__(
    self,
    ids: ArrayLike,
    *,
    deterministic: bool | None = None,
    rngs: nnx.Rngs | nnx.RngStream | Array | None = None,
  ) -> Array:
    ids = jnp.asarray(ids)
    if not jnp.issubdtype(ids.dtype, jnp.integer) or ids.ndim != 2:
      raise ValueError(
        f"CharGPT takes integer character ids [batch, length], got {ids.dtype} of shape "
        f"{list(ids.shape)}."
      )
    if ids.shape[1] > self.block_size:
      raise ValueError(
        f"CharGPT(block_size={self.block_size}) got windows of {ids.shape[1]} characters; "
        f"give at most {self.block_size}."
      )
    x = self.embed(ids.astype(jnp.int32)) + self.position[:, : ids.shape[1]]
    x = self.dropout(x, deterministic=deterministic, rngs=rngs)
    x = self.decoder(jnp.asarray(x, self.dtype), deterministic=deterministic, rngs=rngs)
    return self.embed.attend(jnp.asarray(x, jnp.float32))


def _features(module: Any, owner: str, x: ArrayLike) -> Array:
  """``x`` in the module's dtype, refused unless its last axis has ``in_features``."""
  x = jnp.asarray(x, module.dtype)
  if x.shape[-1:] != (module.in_features,):
    raise ValueError(
      f"{owner}(in_features={module.in_features}) got an input of shape {x.shape}; it takes "
      f"[batch, length, {module.in_features}]."
    )
  return x
