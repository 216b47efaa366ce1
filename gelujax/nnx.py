"""Flax NNX modules: :class:`Activation`, :class:`LearnableGELU` and :class:`GatedMLP`.

The same modules as the Flax Linen ones in :mod:`gelujax.activations`, written the way Flax now
teaches (``nnx.Module``: parameters are created when the module is, and held by it), for models
written in NNX. Parameter names, shapes and initial values are the Linen modules', so
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
from flax import nnx
from jax import Array
from jax.typing import ArrayLike, DTypeLike

from gelujax.activations import gated, gaussian_gelu
from gelujax.linen import _snake_case
from gelujax.specs import module_activation

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
    if isinstance(entry, nnx.Module):
      self.submodule, self.fn = _snake_case(type(entry).__name__), None
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
