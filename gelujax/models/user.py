"""A model of the user's own, named as a task's ``model`` without editing gelujax:
``"module.path:Class"`` or, with keyword literals, ``"module.path:Class(width=64)"``.

``Class`` is a Linen module class, constructed as gelujax's own models are
(``Class(activation=..., dropout=..., **kwargs)``; ``dtype=`` too for a run that computes in
another dtype than float32), or an NNX module class (``Class(*, activation, dropout, rngs,
**kwargs)``, ``__call__(x, train)``), which :class:`FromNNX` makes a Linen module for the engine
(as ``flax.nnx.bridge.ToLinen`` does, with the engine's streams alone): its parameters draw
from the engine's ``params`` stream, its dropout from the ``dropout`` stream
(``nnx.Dropout(rate, rngs=rngs)``), the key the engine derives from a member's seed, epoch and
step, so a member's masks are the same in a resumed run.

:func:`user_model` imports and checks the class (before any data is read), :func:`make_user_model`
constructs it for a spec's activation, dropout and options, :func:`check_outputs` checks on the
data's shapes that its outputs fit the objective, and :func:`model_source` is its record in a
run's config.json (as `gelujax.specs.activation_source` is an activation's).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from gelujax.registry import ParseError
from gelujax.specs import nnx_activation
from gelujax.user_modules import (
  import_user_module,
  parse_user_spec,
  source_record,
)

# What a user's model must be, for the refusals.
VALID = (
  "a Linen module class taking the keyword arguments activation and dropout (as gelujax's own "
  "models do), or an nnx.Module class whose __init__ takes the keyword arguments activation, "
  "dropout and rngs, each with __call__(x, train)"
)


class ActivationNotForModel(ValueError):
  """The activation is one the user's model cannot take (a Linen module class for an NNX
  model): the model and the activation are each valid, the pair is not."""


def _nnx() -> Any:
  """``flax.nnx``, imported where a model or an activation of the user's is an NNX class: a
  Linen model's command never imports it (half a second of its start)."""
  from flax import nnx

  return nnx


def is_user_model(spec: Any) -> bool:
  """Whether the model spec ``spec`` names a class of the user's own (``"module:Class"``)."""
  try:
    return parse_user_spec(spec) is not None
  except ParseError:
    return isinstance(spec, str) and ":" in spec


@functools.cache
def user_model(spec: str) -> tuple[type, dict[str, Any], str]:
  """``(class, keyword arguments, "linen" or "nnx")`` of the user's model ``spec``: its module
  imported from the Python path (``PYTHONPATH``; train.py and reproduce.py add the folder they
  run in) and recorded (`gelujax.user_modules.import_user_module`), the class checked to be a
  Linen or an NNX module class whose ``__call__`` takes ``train``.

  Raises:
    ValueError: the spec cannot be parsed, the module does not import, has no such name, or it
      is no Linen or NNX module class, or its ``__call__`` takes no ``train`` (saying why).
  """
  what = f"model {spec!r}"
  try:
    module_name, name, kwargs = parse_user_spec(spec)
  except ParseError as e:
    raise ValueError(f"{what} cannot be parsed: {e.reason}; expected module:Class or "
                     "module:Class(key=value, ...) with literal values.") from None  # fmt: skip
  module = import_user_module(module_name, what)
  where = getattr(module, "__file__", None) or module_name
  cls = getattr(module, name, None)
  if cls is None:
    raise ValueError(f"{what}: module {module_name!r} ({where}) has no {name!r}.")
  if isinstance(cls, type) and issubclass(cls, nn.Module):
    kind = "linen"
  elif isinstance(cls, type) and issubclass(cls, _nnx().Module):
    kind = "nnx"
  else:
    got = "a class" if isinstance(cls, type) else f"a {type(cls).__name__}"
    raise ValueError(
      f"{what}: {module_name}.{name} is {got}, neither a Linen module class (flax.linen.Module) "
      "nor an NNX module class (flax.nnx.Module)."
    )
  try:
    parameters = inspect.signature(cls.__call__).parameters
  except (TypeError, ValueError):
    parameters = {"train": None}  # no signature to read: the first call decides
  takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
  if "train" not in parameters and not takes_any:
    raise ValueError(
      f"{what}: {module_name}.{name}.__call__{inspect.signature(cls.__call__)} takes no "
      "train; the engine calls a model as model(x, train=True) in training and train=False in "
      "evaluation (dropout on or off)."
    )
  return cls, kwargs, kind


def make_user_model(
  spec: str,
  activation: Any,
  *,
  dropout: float,
  dtype: Any,
  options: Mapping[str, Any],
  activation_spec: str | None = None,
) -> nn.Module:
  """The user's model ``spec`` as the engine calls it, a Linen module: the class (`user_model`)
  with ``activation`` (as `gelujax.linen.make_activation` gives it for ``activation_spec``: a
  function of an array, or a module class with parameters of its own), ``dropout``, the spec's
  keyword arguments and ``options`` (a task's ``model_options``, and those its data decide), and
  ``dtype`` where it is not float32. A Linen class takes a Linen or NNX activation class as
  gelujax's own models do; an NNX class, made a Linen module by :class:`FromNNX` and constructed
  once here (shapes only) so that a constructor that fails does so now, takes a function, or an
  NNX activation class's instance, constructed with the model's ``rngs`` (its parameters are
  the model's once the model keeps it as an attribute, and train with it).

  Raises:
    ValueError: the class does not take these arguments, or its constructor fails (naming it).
    ActivationNotForModel: an NNX class with a Linen activation class.
  """
  cls, kwargs, kind = user_model(spec)
  kwargs = {**kwargs, **options}
  if jnp.dtype(dtype) != jnp.float32:
    kwargs["dtype"] = jnp.dtype(dtype)
  if kind == "linen":
    try:
      return cls(activation=activation, dropout=dropout, **kwargs)
    except TypeError as e:
      raise ValueError(
        f"model {spec!r}: {cls.__name__} does not take the keyword arguments {_given(kwargs)} "
        f"({e})."
      ) from None
  module_class = nnx_activation(activation)
  made = activation.func if isinstance(activation, functools.partial) else activation
  if module_class is None and isinstance(made, type):
    name = f"--activation {activation_spec!r}" if activation_spec else "the activation"
    raise ActivationNotForModel(
      f"{name} is a Linen module class ({made.__module__}.{made.__qualname__}), and --task's "
      f"model {spec!r} an NNX module class, which takes its activation as NNX: a function of "
      "an array (such as 'gelu', or module:function of your own), or an NNX module class of "
      "your own (module:Class, an nnx.Module whose __init__ takes rngs), constructed with the "
      "model's rngs, its parameters training with the model; or make the model a Linen module "
      "class, which takes Linen activation classes."
    )
  if module_class is not None:
    _check_nnx_constructor(
      spec, cls, module_class, dropout, json.dumps(kwargs, default=repr), kwargs, built=True
    )
    return FromNNX(cls, {"dropout": dropout, **kwargs}, module_class)
  _check_nnx_constructor(spec, cls, activation, dropout, json.dumps(kwargs, default=repr), kwargs)
  return FromNNX(cls, {"activation": activation, "dropout": dropout, **kwargs})


class FromNNX(nn.Module):
  """An NNX model class as a Linen module of the engine's calling convention,
  ``init(rngs, x, train=False)`` and ``apply(variables, x, train=..., rngs={"dropout": key})``:
  what ``flax.nnx.bridge.ToLinen`` does, with the engine's streams alone. The class is
  constructed at each call with ``rngs=nnx.Rngs(params=..., dropout=...)``, the keys of the
  Linen streams the engine passes (``params`` at init, ``dropout`` in training), its state then
  replaced by the Linen variables (``params``, and ``batch_stats`` for ``nnx.BatchStat``), so
  its parameters draw from the ``params`` stream and its dropout from the ``dropout`` key the
  engine derives from a member's seed, epoch and step. A stream the engine does not pass is
  given a constant key, drawn from by nothing the run keeps (parameters the variables replace,
  dropout off in evaluation); a training call without a ``dropout`` key, for a model whose
  ``dropout`` is not 0, raises Flax's error for a missing stream, as a Linen model's dropout does
  (`gelujax.engine.step.draws_randomness` reads it).

  Attributes:
    nnx_class: the ``nnx.Module`` class.
    kwargs: its constructor's keyword arguments but ``rngs``.
    activation: ``(class, keyword arguments)`` of an NNX activation class: constructed with the
      same ``rngs`` (before the model) and given to the model as ``activation``; None where
      :attr:`kwargs` holds the activation.
  """

  nnx_class: type
  kwargs: Mapping[str, Any]
  activation: tuple[type, Mapping[str, Any]] | None = None

  @nn.compact
  def __call__(self, x: Any, train: bool) -> Any:
    given = self.scope.rngs
    if (
      train and "dropout" not in given and self.kwargs.get("dropout") and not self.is_initializing()
    ):
      raise flax.errors.InvalidRngError(
        f'{self.nnx_class.__name__} needs PRNG for "dropout" in training'
      )
    streams = {
      name: self.make_rng(name) if name in given else jax.random.key(0)
      for name in ("params", "dropout")
    }
    nnx = _nnx()
    rngs = nnx.Rngs(**streams)
    given_activation = {}
    if self.activation is not None:
      activation_class, activation_kwargs = self.activation
      given_activation = {"activation": activation_class(**activation_kwargs, rngs=rngs)}
    module = self.nnx_class(**self.kwargs, **given_activation, rngs=rngs)
    if not self.is_initializing():
      nnx.update(module, nnx.merge_state(*[nnx.State(dict(v)) for v in self.variables.values()]))
    out = module(x, train=train)
    state = nnx.state(module, nnx.Not(nnx.RngState))
    collections: dict[str, dict] = {}
    for path, leaf in nnx.to_flat_state(state):
      collection = nnx.variablelib.variable_name_from_type(type(leaf), allow_register=True)
      collections.setdefault(collection, {})[path] = leaf.get_value()
    for collection, flat in collections.items():
      if self.is_initializing() or self.is_mutable_collection(collection):
        for name, value in nnx.traversals.unflatten_mapping(flat).items():
          self.put_variable(collection, name, value)
    return out


def _given(kwargs: Mapping[str, Any]) -> str:
  return ", ".join(["activation", "dropout", *kwargs])


_CONSTRUCTED: set[tuple] = set()


def _check_nnx_constructor(spec, cls, activation, dropout, key, kwargs, built=False) -> None:
  """Constructs the NNX class ``cls`` once for these arguments, shapes only (`nnx.eval_shape`);
  ``built``: ``activation`` is ``(class, keyword arguments)`` of an NNX activation class,
  constructed with the same rngs first (as :class:`FromNNX` does).

  Raises:
    ValueError: its ``__init__`` does not take them, or raises (naming it and the reason).
  """
  made = (id(activation[0]), repr(activation[1])) if built else id(activation)
  seen = (spec, made, dropout, key)
  if seen in _CONSTRUCTED:
    return
  what = f"model {spec!r}"
  try:
    signature = inspect.signature(cls.__init__)
    signature.bind(None, activation=activation, dropout=dropout, rngs=None, **kwargs)
  except TypeError as e:
    raise ValueError(
      f"{what}: {cls.__name__}.__init__{signature} does not take the keyword arguments "
      f"{_given(kwargs)}, rngs ({e})."
    ) from None
  except ValueError:  # no signature to check: the call decides
    pass
  nnx = _nnx()
  try:

    def construct():
      rngs = nnx.Rngs(params=0, dropout=1)
      made = activation[0](**activation[1], rngs=rngs) if built else activation
      return cls(activation=made, dropout=dropout, rngs=rngs, **kwargs)

    nnx.eval_shape(construct)
  except Exception as e:  # The user's code: whatever it raises is the reason.
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    raise ValueError(
      f"{what}: {cls.__name__}(activation=..., dropout={dropout!r}, rngs=..."
      f"{''.join(f', {k}={v!r}' for k, v in kwargs.items())}) raised {type(e).__name__}"
      f"{f': {first}' if first else ''}."
    ) from None
  _CONSTRUCTED.add(seen)


def check_outputs(
  spec: str,
  model: nn.Module,
  objective: str,
  prepare: Callable[..., Any],
  splits: Mapping[str, Mapping[str, np.ndarray]],
) -> None:
  """Refuses a model whose outputs do not fit ``objective`` on ``splits``, traced (shapes only)
  on two training examples made ready as the engine makes them (``prepare``, the objective's
  ``prepare_batch``), initialised and applied in training and in evaluation: classification
  takes ``[batch, classes]`` with a class for every target, token classification ``[batch,
  tokens, classes]``, reconstruction the inputs' shape.

  Raises:
    ValueError: the model fails on the inputs, or its outputs have another shape (naming the
      model ``spec``, the shapes, and what would fit).
  """
  train = splits["train"]
  batch = {k: np.asarray(v[:2]) for k, v in train.items() if k in ("inputs", "targets")}
  targets = [np.asarray(s["targets"]) for s in splits.values() if "targets" in s]
  classes = 1 + max((int(t.max()) for t in targets if t.size), default=0)
  what = f"model {spec!r}"

  def outputs():
    inputs, _ = prepare(batch, False, None)
    key = jax.random.key(0)
    variables = model.init({"params": key, "dropout": key}, inputs, train=False)
    trained = model.apply(
      variables, inputs, train=True, rngs={"dropout": key}, mutable=["batch_stats"]
    )[0]
    return inputs, model.apply(variables, inputs, train=False), trained

  try:
    inputs, evaluated, trained = jax.eval_shape(outputs)
  except Exception as e:  # The user's code: whatever it raises is the reason.
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    raise ValueError(
      f"{what} raised {type(e).__name__}{f': {first}' if first else ''} when initialised and "
      f"applied on a batch of the training inputs of shape {list(batch['inputs'].shape)} "
      f"(as model(x, train=...)); it must take inputs of that shape per batch."
    ) from None
  size = batch["inputs"].shape[0]
  if objective == "reconstruction":
    fits, want = (lambda s: s == tuple(inputs.shape)), f"the inputs' shape {list(inputs.shape)}"
  elif objective == "token_classification":
    tokens = batch["targets"].shape[1]

    def fits(s):
      return len(s) == 3 and s[:2] == (size, tokens) and s[2] >= classes

    want = f"[batch, tokens, classes] = [{size}, {tokens}, at least {classes}]"
  else:

    def fits(s):
      return len(s) == 2 and s[0] == size and s[1] >= classes

    want = f"[batch, classes] = [{size}, at least {classes}] (a logit for each class of the data)"
  for mode, out in (("evaluation", evaluated), ("training", trained)):
    shape = tuple(getattr(out, "shape", ()))
    if not hasattr(out, "shape") or not fits(shape):
      got = f"shape {list(shape)}" if hasattr(out, "shape") else f"a {type(out).__name__}"
      raise ValueError(
        f"{what} gives outputs of {got} in {mode} for a batch of inputs of shape "
        f"{list(batch['inputs'].shape)}; objective {objective!r} takes one array of {want}."
      )


def model_source(spec: str) -> dict[str, Any] | None:
  """Where the user's model ``spec`` comes from, for a run's record (config.json's
  ``model_source``): ``{"module", "function", "file", "sha256", "imports"}`` as
  `gelujax.user_modules.source_record` gives them (``function``: the class's name); None for
  gelujax's own presets."""
  if not is_user_model(spec):
    return None
  user_model(spec)  # imported and checked
  module_name, name, _ = parse_user_spec(spec)
  return source_record(module_name, name)
