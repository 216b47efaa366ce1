"""The activations' registry, :data:`ACTIVATIONS`, and the checks of a spec's arguments that its
entries register with (`gelujax.registry.Registry.register`'s ``check``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from jax import Array

from gelujax.registry import Registry

ACTIVATIONS: Registry[Callable[..., Array]] = Registry("activation")


# --- What a spec's arguments may be (`Registry.register`'s ``check``): a spec's literals are
# checked when it is resolved, before any work, not when a traced function first meets them.


def _numbers(value: Any) -> list[Any]:
  """The items of a literal that is a (nested) list or tuple; ``[value]`` for any other."""
  if isinstance(value, list | tuple):
    return [item for part in value for item in _numbers(part)]
  return [value]


def number_problem(
  arguments: dict[str, Any],
  name: str,
  *,
  array: bool = False,
  infinite: bool = False,
  positive: str = "",
) -> str | None:
  """What is wrong with the argument ``name`` of a spec (a clause), or None. It must be a number
  (an int or a float; with ``array``, also a list of them, which broadcasts against the input),
  finite unless ``infinite``; with ``positive`` (what the argument is: ``"a standard
  deviation"``), also > 0 and normal in float32 (the activation divides by it)."""
  value = arguments[name]
  numbers = _numbers(value) if array else [value]
  if not numbers or any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers):
    return f"{name} must be a number{' or a list of numbers' * array}, not {value!r}"
  if not infinite and not all(math.isfinite(v) for v in numbers):
    return f"{name} must be finite, not {value!r}"
  tiny = float(np.finfo(np.float32).tiny)
  if positive and not all(v >= tiny for v in numbers):
    return (
      f"{name} is {positive}, which must be > 0 and normal in float32 (at least {tiny:.3g}), "
      f"not {value!r}"
    )
  return None


def bool_problem(arguments: dict[str, Any], name: str) -> str | None:
  """What is wrong with the argument ``name`` of a spec, which must be True or False, or None."""
  value = arguments[name]
  return None if isinstance(value, bool) else f"{name} must be True or False, not {value!r}"
