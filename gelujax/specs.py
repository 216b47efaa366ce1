"""Activation specs: how a name becomes a function. A spec is a registered name with optional
keyword literals (``"gaussian_gelu(sigma=0.5)"``, :func:`activation_names`), another
framework's alias (``"jax:gelu"``, :func:`activation_aliases`), or a function of the user's own
(``"my_pkg.acts:squareplus(b=4.0)"``, :func:`user_activation`; or one registered by a script,
:func:`register_activation`). :func:`resolve_activation` is the one place a spec becomes a
function, for the Linen and NNX modules; :func:`gated_unit` the one place an activation is found
to be a gated linear unit (``"geglu"``, :func:`gelujax.swiglu`), which halves its input's last
axis; :func:`activation_source` is a user's function's record in a run's config.json.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from gelujax.activations import ACTIVATIONS, GATED_UNITS, gated
from gelujax.registry import ParseError, close_names, parse_name, sentences
from gelujax.user_modules import (
  import_user_module,
  note_user_module,
  parse_user_spec,
  source_record,
)


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
# What a user's function is checked on: float32 values across the GELUs' interesting range,
# -4 to 4.8 in steps of 0.8, 0 included.
_PROBE = (np.arange(-5, 7, dtype=np.float32) * np.float32(0.8)).reshape(3, 4)
# Functions registered by scripts (`register_activation`): their source is recorded in runs.
_REGISTERED: dict[str, Callable[..., Array]] = {}


def _user_spec(spec: str) -> tuple[str, str, dict[str, Any]] | None:
  """``(module, function, keyword arguments)`` when ``spec`` names a user's function,
  ``"module:function(k=v)"`` whose module is not an alias namespace (``"torch:gelu"``); else
  None. Only literals are parsed (`gelujax.registry.parse_name`): nothing runs but the import
  of the module named."""
  user = parse_user_spec(spec)
  if user is None or user[0] in ACTIVATIONS.namespaces():
    return None
  return user


def check_elementwise(fn: Callable[..., Any], what: str, dtype: str = "float32") -> None:
  """Refuses ``fn`` unless it maps an array to one of the same shape and dtype, as the models'
  activations must, and to finite values (float32): a NaN or an infinity for a finite input
  diverges every member that meets it, which its run would only report as diverged members.
  It is traced and called on a float32 array; ``dtype``, a run's compute dtype, is also traced
  where it is another (a function written for float32 alone is refused only by a run that
  computes in bfloat16, `activation_fingerprint`).

  Raises:
    ValueError: naming ``what``, the input and what came back.
  """
  for probe in dict.fromkeys((jnp.float32, jnp.dtype(dtype).type)):
    x = jnp.asarray(_PROBE, probe)
    in_run = "" if probe == jnp.float32 else f" (this run computes in {probe.__name__}: `dtype`)"
    try:
      # Traced as training traces it (a NumPy function cannot be), through a Python function
      # (jax.jit of a NumPy ufunc itself crashes the process); called in float32.
      traced = jax.eval_shape(lambda v: fn(v), x)
      y = fn(x) if probe == jnp.float32 else traced
    except Exception as e:  # The user's code: whatever it raises is the reason.
      first = str(e).strip().splitlines()[0] if str(e).strip() else ""
      raise ValueError(
        f"{what} raised {type(e).__name__}{f': {first}' if first else ''} when called on a "
        f"{probe.__name__} array of shape {x.shape}{in_run}."
      ) from None
    shape, got = getattr(y, "shape", None), getattr(y, "dtype", type(y).__name__)
    if shape != x.shape or got != x.dtype:
      raise ValueError(
        f"{what} maps a {probe.__name__} array of shape {x.shape} to {got} of shape {shape}"
        f"{in_run}; an activation must keep its input's shape and dtype (it is applied "
        "element-wise)."
      )
    if probe == jnp.float32 and not np.isfinite(y).all():
      i = np.flatnonzero(~np.isfinite(y))[0]
      raise ValueError(
        f"{what} returns {np.ravel(y)[i]} for the finite input {_PROBE.flat[i]} (float32); an "
        "activation must be finite wherever its input is, or every member that meets such an "
        "input diverges."
      )


def activation_module(cls: type, kwargs: dict[str, Any], what: str, where: str) -> Any:
  """A user's activation with parameters, the module class ``cls`` with ``kwargs`` bound: a
  Linen module class as it is, an NNX module class (constructed with ``rngs``, as NNX modules
  are) wrapped for Linen models by ``flax.nnx.bridge.ToLinen``. It is initialised and applied
  once on a float32 array, which it must map to one of the same shape and dtype, finite.

  Raises:
    ValueError: any other class, arguments the class does not take, or a module that fails
      on the array or changes its shape or dtype (naming ``what`` and ``where``).
  """
  import flax.linen as nn
  from flax import nnx

  if issubclass(cls, nn.Module):
    made, built = (functools.partial(cls, **kwargs) if kwargs else cls), "its arguments"
  elif issubclass(cls, nnx.Module):
    made = functools.partial(nnx.bridge.ToLinen, cls, kwargs=kwargs)
    built = "its arguments and rngs"
  else:
    raise ValueError(
      f"{what}: {where} is a class, neither a Linen module (flax.linen.Module) nor an NNX "
      "module (flax.nnx.Module); an activation is a function of an array, or, with parameters "
      "of its own that train with the network, a Linen or NNX module class."
    )
  x = jnp.asarray(_PROBE)
  try:
    module = made()
    variables = module.init(jax.random.key(0), x)
    module.apply(variables, x)
  except Exception as e:  # The user's code: whatever it raises is the reason.
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    raise ValueError(
      f"{what}: {where}{f'({kwargs})' if kwargs else ''} raised {type(e).__name__}"
      f"{f': {first}' if first else ''} when initialised and applied on a float32 array of "
      f"shape {x.shape} (the class is constructed with {built})."
    ) from None
  check_elementwise(lambda v: module.apply(variables, v), what)
  return made


def nnx_activation(activation: Any) -> tuple[type, Mapping[str, Any]] | None:
  """``(class, keyword arguments)`` where ``activation`` is an NNX module class of the user's
  own as `gelujax.linen.make_activation` gives it for Linen models (wrapped by
  ``flax.nnx.bridge.ToLinen``, :func:`activation_module`); else None. It never imports
  flax.nnx: wrapping one imported it."""
  nnx = sys.modules.get("flax.nnx")  # Never imported where no NNX activation was wrapped.
  if nnx and isinstance(activation, functools.partial) and activation.func is nnx.bridge.ToLinen:
    (cls,) = activation.args
    return cls, dict(activation.keywords.get("kwargs") or {})
  return None


@functools.cache
def user_activation(spec: str) -> Callable[..., Array]:
  """The user's function named by ``spec``, ``"module.path:function"`` or with keyword
  literals, ``"module.path:function(b=4.0)"``: the module is imported from the Python path
  (``PYTHONPATH``; train.py and reproduce.py add the folder they run in), and the function is
  checked once to keep its input's shape and dtype. The run records the module, the function
  and its source file's sha256, and those of the user's modules it imports
  (:func:`activation_source`).

  Raises:
    ValueError: the module does not import, has no such function, it is not callable, does not
      take the arguments, or changes the shape or the dtype of its input.
  """
  module_name, function, kwargs = _user_spec(spec)
  what = f"activation {spec!r}"
  before = set(sys.modules)
  try:
    module = import_user_module(module_name, what)
  except ValueError as e:
    problem = str(e)
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
  if isinstance(fn, type):  # An activation with parameters: a Linen or an NNX module class.
    made = activation_module(fn, kwargs, what, f"{module_name}.{function}")
    note_user_module(module_name, before)
    return made
  if kwargs:
    try:
      inspect.signature(fn).bind_partial(None, **kwargs)
    except TypeError as e:
      raise ValueError(f"{what}: {module_name}.{function} does not take {kwargs}: {e}.") from None
    except ValueError:  # No signature to check: the call decides.
      pass
    fn = functools.partial(fn, **kwargs)
  check_elementwise(fn, what)
  # What the import and the first calls ran, dynamic imports included (`activation_source`).
  note_user_module(module_name, before)
  return fn


def register_activation(name: str, fn: Callable[..., Array]) -> None:
  """Registers ``fn`` as the activation ``name`` for this process: models, ``TaskSpec``,
  ``gelujax.engine.fit`` and ``gelujax.study.reproduce`` then take it by name (e.g.
  ``spec.replace(activation=name)``). Its module, qualified name and source file's sha256, and
  those of the user's modules that module imports, are recorded in each run's config.json, so
  a run resumed after any of those files changed is refused.

  Raises:
    ValueError: ``name`` is not an identifier or is taken, or ``fn`` is not an element-wise
      function of an array (:func:`check_elementwise`).
  """
  if not isinstance(name, str) or not name.isidentifier():
    raise ValueError(f"register_activation: name {name!r} is not an identifier.")
  if name in ACTIVATIONS:
    raise ValueError(f"register_activation: activation {name!r} is already registered.")
  if name in GATED_UNITS:
    raise ValueError(
      f"register_activation: {name!r} is the name of a gated linear unit (gelujax.{name}), "
      "which a transformer's feed-forward block takes by that name; choose another."
    )
  if not callable(fn):
    raise ValueError(f"register_activation: {name!r} is a {type(fn).__name__}, not a function.")
  check_elementwise(fn, f"activation {name!r}")
  ACTIVATIONS.register(name, fn)
  _REGISTERED[name] = fn


def activation_source(spec: str) -> dict[str, Any] | None:
  """Where a user's activation comes from, for a run's record: ``{"module", "function",
  "file", "sha256", "imports"}``: the sha256 of the source file's bytes (as the module's loader
  reads them: from a zip archive too), and ``imports``, the same ``{"module", "file",
  "sha256"}`` of each of the user's modules that the activation's module imports
  (`gelujax.user_modules.user_imports`). None for gelujax's own."""
  user = _user_spec(spec)
  if user is not None:
    module_name, function, _ = user
    user_activation(spec)  # imported and checked
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
  return source_record(module_name, function)


# Where `activation_fingerprint` reads an activation: the GELUs' range and both tails.
_FINGERPRINT_POINTS = (
  -30.0, -8.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.25, -0.1, 0.0,
  0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 30.0,
)  # fmt: skip
# How far a value may move (in units of its dtype's epsilon, relative) and still be the same
# function: another CPU's or XLA version's rounding of the same code, never an edit.
FINGERPRINT_ULPS = 4


@functools.cache
def activation_fingerprint(spec: str, dtype: str) -> dict[str, Any] | None:
  """What the activation ``spec`` computes, for a run's record: its values and derivatives at
  fixed points (``-30`` to ``30``), computed in ``dtype`` (the run's compute dtype), with whether
  JAX computes in 64 bits. Whatever makes a function compute otherwise (its file edited, a stale
  ``.pyc``, an environment variable or a file it reads, a changed argument) changes these
  numbers, so a resume compares them (`same_function`) rather than trust a file's hash. A gated
  unit is read with its value and gate both ``x``; None for an activation with parameters (a
  module: its parameters are in the checkpoint, its code gelujax's).

  Raises:
    ValueError: the function fails on the points (naming it), as `check_elementwise` would.
  """
  unit = gated_unit(spec)
  if unit is not None:

    def fn(x):
      return unit(jnp.stack([x, x], axis=-1))[..., 0]

  else:
    fn = resolve_activation(spec)[2]
    made = fn.func if isinstance(fn, functools.partial) else fn
    if isinstance(made, type):
      return None
    # A user's function was checked in float32 when it was resolved: here in another run dtype.
    if dtype != "float32" and (_user_spec(spec) is not None or spec in _REGISTERED):
      check_elementwise(fn, f"activation {spec!r}", dtype)
  x = jnp.asarray(_FINGERPRINT_POINTS, dtype)
  try:  # One program, not one per operation of the function.
    values, slopes = jax.jit(lambda x: jax.jvp(fn, (x,), (jnp.ones_like(x),)))(x)
  except Exception as e:  # The user's code: whatever it raises is the reason.
    raise ValueError(
      f"activation {spec!r} raised {type(e).__name__} when differentiated in {dtype}: {e}"
    ) from None
  for name, found in (("value", values), ("derivative", slopes)):
    bad = np.flatnonzero(~np.isfinite(np.asarray(found, np.float64)))
    if bad.size:
      raise ValueError(
        f"activation {spec!r} has the {name} {np.asarray(found)[bad[0]]} at the finite input "
        f"{_FINGERPRINT_POINTS[bad[0]]} ({dtype}); an activation must be finite, with a finite "
        "derivative, wherever its input is, or every member that meets such an input diverges."
      )
  return {
    "dtype": dtype,
    "x64": bool(jax.config.read("jax_enable_x64")),
    "points": list(_FINGERPRINT_POINTS),
    "values": [float(v) for v in np.asarray(values, np.float64)],
    "derivatives": [float(v) for v in np.asarray(slopes, np.float64)],
  }


def same_function(old: dict[str, Any], new: dict[str, Any]) -> str | None:
  """Why two `activation_fingerprint` records are not one function (None when they are): the
  first point where a value or a derivative differs by more than `FINGERPRINT_ULPS` of its
  dtype's epsilon, or another dtype, 64-bit setting or set of points."""
  for key in ("dtype", "x64", "points"):
    if old.get(key) != new.get(key):
      return f"its {key} {old.get(key)!r} (now {new.get(key)!r})"
  eps = float(jnp.finfo(jnp.dtype(new["dtype"])).eps)
  for key in ("values", "derivatives"):
    a, b = (np.asarray(r[key], np.float64) for r in (old, new))
    scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1.0)
    far = ~((np.abs(a - b) <= FINGERPRINT_ULPS * eps * scale) | (np.isnan(a) & np.isnan(b)))
    if a.shape != b.shape or far.any():
      i = int(np.flatnonzero(far)[0]) if a.shape == b.shape else 0
      point = old["points"][i]
      word = "value" if key == "values" else "derivative"
      return f"its {word} at {point:g}: {a[i]:.9g} (now {b[i]:.9g})"
  return None


def activation_names() -> list[str]:
  """The registered element-wise activation names, sorted (aliases are in
  :func:`activation_aliases`; the gated linear units, which map ``2 n`` features to ``n``, in
  :func:`gated_unit_names`)."""
  return ACTIVATIONS.names()


def gated_unit_names() -> list[str]:
  """The gated linear units, sorted: a transformer's feed-forward block (and a task whose model
  has one) takes them by name, ``"geglu"`` or ``"geglu(approximate=True)"``; see
  :func:`gated_unit`."""
  return GATED_UNITS.names()


def _gated_problem(spec: str) -> str:
  """Why the element-wise activation ``spec`` is unknown, where the answer is a gated linear
  unit: it is one (which only a feed-forward block takes), or its name is close to one; else
  ``""``."""
  try:
    name = parse_name(spec)[0]
  except (ParseError, ValueError):
    return ""
  if name in GATED_UNITS:
    return (
      f"{spec!r} is a gated linear unit (gelujax.{name}: it maps 2n features to n), not an "
      "element-wise activation: a transformer's feed-forward block takes it by name (e.g. "
      "the tasks vit_cifar10 and char_lm; gelujax.linen.FeedForward), and "
      f"gelujax.gated_unit_names() lists them: {', '.join(GATED_UNITS.names())}."
    )
  near = close_names(name, GATED_UNITS.names())
  if near:
    return f"Gated linear units (for a transformer's feed-forward) close to it: {', '.join(near)}."
  return ""


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
  try:
    canonical = ACTIVATIONS.resolve(spec)
    name, kwargs = parse_name(canonical)
    return name, kwargs, ACTIVATIONS.get(canonical)
  except ValueError as e:
    gated_problem = _gated_problem(spec) if spec not in ACTIVATIONS else ""
    if not gated_problem:
      raise
    if "Did you mean" in str(e) and gated_problem.startswith("'"):  # a guess that is wrong
      raise ValueError(gated_problem) from None
    raise ValueError(sentences(str(e), gated_problem)) from None


def gated_unit(activation: Any) -> Callable[[Array], Array] | None:
  """The gated linear unit ``activation`` is, as a function of an array that maps ``2 n``
  features of its last axis to ``n``; None for any other activation (element-wise, or a module).

  The one test of whether an activation is a gated linear unit, so that a feed-forward block
  sizes its first layer for the unit's value and gate (:class:`gelujax.linen.FeedForward`).
  A unit is one of :data:`gelujax.activations.GATED_UNITS`: by its spec (``"geglu"``,
  ``"geglu(approximate=True)"``, ``"swiglu"``, ``"reglu"``, ``"gated(activation='gelu_tanh')"``,
  whose gate is any element-wise activation spec) or as the function itself, under
  ``functools.partial`` too (``gelujax.geglu``,
  ``functools.partial(gelujax.gated, activation=jax.nn.sigmoid)``), and ``jax.nn.glu`` (Flax's
  ``glu``), which is ``gated(x, jax.nn.sigmoid)``. Membership decides, not the shapes a
  function maps, so an element-wise activation is never taken for a unit; a unit of one's own
  is ``gated`` with its gate.

  Raises:
    ValueError: for a unit's spec with arguments it does not take, ``gated`` without its gate,
      or a gate that is no element-wise function (``learnable_gelu`` and ``soi_map`` need a
      module: :class:`gelujax.linen.GatedMLP` takes them as its gate).
  """
  if isinstance(activation, str):
    return _gated_unit_spec(activation)
  entry = activation
  while isinstance(entry, functools.partial):
    entry = entry.func
  if entry is not jax.nn.glu and not any(entry is GATED_UNITS.lookup(n) for n in GATED_UNITS):
    return None
  bound = activation.keywords if isinstance(activation, functools.partial) else {}
  if entry is gated and "activation" not in bound:
    raise ValueError(
      f"gated_unit got {activation!r}: gelujax.gated needs its gate's activation bound, as in "
      "functools.partial(gelujax.gated, activation=gelujax.silu)."
    )
  return activation


@functools.cache
def _gated_unit_spec(spec: str) -> Callable[[Array], Array] | None:
  """:func:`gated_unit` of a spec: the unit it names, with its arguments (and gate) bound."""
  try:
    name = parse_name(spec)[0]
  except ParseError:  # A user's "module:function", an alias or no spec: not a unit's.
    return None
  if name not in GATED_UNITS:
    return None
  unit = GATED_UNITS.get(spec)  # Checks the arguments.
  if name != "gated":
    return unit
  if not isinstance(unit, functools.partial):
    raise ValueError(
      f"Gated linear unit {spec!r} needs its gate's activation, as in \"gated(activation='silu')\"."
    )
  gate_name, _, gate = resolve_activation(unit.keywords["activation"])
  if gate_name == "soi_map" or isinstance(
    gate.func if isinstance(gate, functools.partial) else gate, type
  ):
    raise ValueError(
      f"Gated linear unit {spec!r}: its gate must be an element-wise function, and "
      f"{gate_name!r} needs a module (its parameters or random masks); use GatedMLP, whose "
      "gate is an Activation module."
    )
  return functools.partial(gated, activation=gate)


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
