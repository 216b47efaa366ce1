"""Activation specs: how a name becomes a function. A spec is a registered name with optional
keyword literals (``"gaussian_gelu(sigma=0.5)"``, :func:`activation_names`), another
framework's alias (``"jax:gelu"``, :func:`activation_aliases`), or a function of the user's own
(``"my_pkg.acts:squareplus(b=4.0)"``, :func:`user_activation`; or one registered by a script,
:func:`register_activation`). :func:`resolve_activation` is the one place a spec becomes a
function, for the Linen and NNX modules; :func:`activation_source` is a user's function's
record in a run's config.json.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from gelujax.activations import ACTIVATIONS
from gelujax.registry import close_names, parse_name, sentences


def get_activation(spec: str) -> Callable[..., Array]:
  """The activation named by ``spec``: ``"gelu"``, ``"gaussian_gelu(mu=0.5, sigma=2.0)"``, an
  alias such as ``"jax:gelu"`` (see :func:`activation_aliases`), or a function of the user's
  own, ``"my_pkg.acts:squareplus"`` or ``"my_pkg.acts:squareplus(b=4.0)"`` (see
  :func:`user_activation`).

  Raises:
    ValueError: for an unknown name (listing the known ones), arguments it does not take, or a
      user's function that cannot be used (saying why).
  """
  return resolve_activation(spec)[2]


# ------------------------------------------------------------------ the user's activations

# "module.path:function" with keyword literals after the function, as registry names take them.
_USER_SPEC = re.compile(r"\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*:(.*)", re.DOTALL)
# What a user's function is checked on: float32 values across the GELUs' interesting range.
_PROBE = np.linspace(-4.0, 4.0, 12, dtype=np.float32).reshape(3, 4)
# Functions registered by scripts (`register_activation`): their source is recorded in runs.
_REGISTERED: dict[str, Callable[..., Array]] = {}


def _user_spec(spec: str) -> tuple[str, str, dict[str, Any]] | None:
  """``(module, function, keyword arguments)`` when ``spec`` names a user's function,
  ``"module:function(k=v)"`` whose module is not an alias namespace (``"torch:gelu"``); else
  None. Only literals are parsed (`gelujax.registry.parse_name`): nothing runs but the import
  of the module named."""
  match = _USER_SPEC.fullmatch(spec) if isinstance(spec, str) else None
  if match is None or match.group(1) in ACTIVATIONS.namespaces():
    return None
  function, kwargs = parse_name(match.group(2))
  return match.group(1), function, kwargs


def check_elementwise(fn: Callable[..., Any], what: str) -> None:
  """Refuses ``fn`` unless it maps an array to one of the same shape and dtype (float32 called,
  bfloat16 traced), as the models' activations must.

  Raises:
    ValueError: naming ``what``, the input and what came back.
  """
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jnp.asarray(_PROBE, dtype)
    try:
      y = fn(x) if dtype == jnp.float32 else jax.eval_shape(fn, x)
    except Exception as e:  # The user's code: whatever it raises is the reason.
      first = str(e).strip().splitlines()[0] if str(e).strip() else ""
      raise ValueError(
        f"{what} raised {type(e).__name__}{f': {first}' if first else ''} when called on a "
        f"{dtype.__name__} array of shape {x.shape}."
      ) from None
    shape, got = getattr(y, "shape", None), getattr(y, "dtype", type(y).__name__)
    if shape != x.shape or got != x.dtype:
      raise ValueError(
        f"{what} maps a {dtype.__name__} array of shape {x.shape} to {got} of shape {shape}; an "
        "activation must keep its input's shape and dtype (it is applied element-wise)."
      )


@functools.cache
def user_activation(spec: str) -> Callable[..., Array]:
  """The user's function named by ``spec``, ``"module.path:function"`` or with keyword
  literals, ``"module.path:function(b=4.0)"``: the module is imported from the Python path (the
  current folder, ``PYTHONPATH``), and the function is checked once to keep its input's shape
  and dtype. The run records the module, the function and its source file's sha256
  (:func:`activation_source`).

  Raises:
    ValueError: the module does not import, has no such function, it is not callable, does not
      take the arguments, or changes the shape or the dtype of its input.
  """
  module_name, function, kwargs = _user_spec(spec)
  what = f"activation {spec!r}"
  if os.getcwd() not in sys.path:  # as `python -m` would: the user's folder, after the rest
    sys.path.append(os.getcwd())
  try:
    module = importlib.import_module(module_name)
  except Exception as e:  # The user's module: whatever its import raises is the reason.
    problem = (
      f"{what}: module {module_name!r} does not import ({type(e).__name__}: {e}); it must be "
      "importable from the Python path (the current folder or PYTHONPATH)."
    )
    if close_names(module_name, ACTIVATIONS.namespaces()):  # "pytorch:gelu": a mistyped alias
      try:
        ACTIVATIONS.get(spec)
      except ValueError as alias:
        problem = sentences(str(alias), f"As a function of your own: {problem}")
    raise ValueError(problem) from None
  fn = getattr(module, function, None)
  where = getattr(module, "__file__", None) or module_name
  if fn is None:
    raise ValueError(f"{what}: module {module_name!r} ({where}) has no {function!r}.")
  if not callable(fn):
    raise ValueError(
      f"{what}: {module_name}.{function} is a {type(fn).__name__}, not a function of an array."
    )
  if kwargs:
    try:
      inspect.signature(fn).bind_partial(None, **kwargs)
    except TypeError as e:
      raise ValueError(f"{what}: {module_name}.{function} does not take {kwargs}: {e}.") from None
    except ValueError:  # No signature to check: the call decides.
      pass
    fn = functools.partial(fn, **kwargs)
  check_elementwise(fn, what)
  return fn


def register_activation(name: str, fn: Callable[..., Array]) -> None:
  """Registers ``fn`` as the activation ``name`` for this process: models, ``TaskSpec``,
  ``gelujax.engine.fit`` and ``gelujax.study.reproduce`` then take it by name (e.g.
  ``spec.replace(activation=name)``). Its module, qualified name and source file's sha256 are
  recorded in each run's config.json, so a run resumed after the file changed is refused.

  Raises:
    ValueError: ``name`` is not an identifier or is taken, or ``fn`` is not an element-wise
      function of an array (:func:`check_elementwise`).
  """
  if not isinstance(name, str) or not name.isidentifier():
    raise ValueError(f"register_activation: name {name!r} is not an identifier.")
  if name in ACTIVATIONS:
    raise ValueError(f"register_activation: activation {name!r} is already registered.")
  if not callable(fn):
    raise ValueError(f"register_activation: {name!r} is a {type(fn).__name__}, not a function.")
  check_elementwise(fn, f"activation {name!r}")
  ACTIVATIONS.register(name, fn)
  _REGISTERED[name] = fn


def activation_source(spec: str) -> dict[str, str] | None:
  """Where a user's activation comes from, for a run's record: ``{"module", "function",
  "file", "sha256"}`` (the sha256 of the source file's bytes); None for gelujax's own."""
  user = _user_spec(spec)
  if user is not None:
    module_name, function, _ = user
    user_activation(spec)  # imported and checked
    file = getattr(sys.modules[module_name], "__file__", None)
  else:
    try:
      name = parse_name(spec)[0]
    except ValueError:
      return None
    if name not in _REGISTERED:
      return None
    fn = inspect.unwrap(_REGISTERED[name])
    module_name = getattr(fn, "__module__", None) or "?"
    function = getattr(fn, "__qualname__", None) or type(fn).__name__
    file = getattr(sys.modules.get(module_name), "__file__", None)
  digest = None
  if file:
    with open(file, "rb") as f:
      digest = hashlib.sha256(f.read()).hexdigest()
  return {"module": module_name, "function": function, "file": file, "sha256": digest}


def activation_names() -> list[str]:
  """The registered activation names, sorted (aliases are in :func:`activation_aliases`)."""
  return ACTIVATIONS.names()


def activation_aliases() -> dict[str, str]:
  """Other frameworks' names (``"framework:name(args)"``) -> the gelujax spec that computes them."""
  return ACTIVATIONS.aliases()


@functools.cache
def resolve_activation(spec: str) -> tuple[str, dict[str, Any], Callable[..., Array]]:
  """``(name, keyword arguments, function)`` of an activation spec, aliases resolved (the
  function has the arguments bound): what the Linen and NNX ``Activation`` modules apply.
  Cached, so a spec is parsed and checked once a process."""
  if _user_spec(spec) is not None:
    return spec, {}, user_activation(spec)
  canonical = ACTIVATIONS.resolve(spec)
  name, kwargs = parse_name(canonical)
  return name, kwargs, ACTIVATIONS.get(canonical)


def module_activation(
  activation: Any, owner: str, *, modules: str, module_class: type | None = None
) -> tuple[str | None, dict[str, Any], Callable[..., Any]]:
  """What a Linen or NNX module's ``activation`` argument applies: the one check of both APIs.

  A spec string is resolved (:func:`resolve_activation`: ``(name, keyword arguments,
  function)``); a function, or any other callable object, is taken as given
  (``(None, {}, activation)``), as is a class (or a ``functools.partial`` of one) that
  subclasses ``module_class``, Linen's module classes, which the module makes into submodules.

  Args:
    activation: the value given.
    owner: the module's class name, for the message.
    modules: the modules this API takes as activations, for the message (``"a Linen module
      class (gelujax.LearnableGELU)"``).
    module_class: the base of the module classes taken; None: no class is.

  Raises:
    TypeError: any other value (a number, None, another class), in one sentence naming
      ``owner``, the value and what is valid.
    ValueError: a spec that names no activation (saying why).
  """
  if isinstance(activation, str):
    return resolve_activation(activation)
  made = activation.func if isinstance(activation, functools.partial) else activation
  if isinstance(made, type):
    taken = module_class is not None and issubclass(made, module_class)
  else:
    taken = callable(activation)
  if taken:
    return None, {}, activation
  kind = type(activation).__name__
  kind = "a class" if isinstance(activation, type) else f"a{'n' * (kind[0] in 'aeiou')} {kind}"
  raise TypeError(
    f"{owner} got activation={activation!r}, {kind}; expected a function of an array "
    f"(gelujax.gelu, jax.nn.relu), {modules} or an activation spec ('gelu', "
    "'gaussian_gelu(sigma=0.5)'; gelujax.activation_names())."
  )
