"""A run's grid: every (learning rate, seed) pair, the *members* trained together.

`Members` is the one grid value of gelujax: the trainer stacks its members' states, config.json
and metrics.jsonl list them in its order, and the study and the command lines build it from
their flags. It needs nothing but Python and NumPy, so reading results does not load JAX.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np


def learning_rates_problem(learning_rates: Sequence[Any]) -> str | None:
  """What is wrong with a grid's learning rates (None when nothing is): the one check of a
  learning rate, for `Members` and for ``TaskSpec.learning_rates`` alike.

  Each must be a finite number > 0 and a normal float32 (the members train in float32), and
  none may repeat.
  """
  if not learning_rates:
    return "is empty; give one or more, e.g. 1e-3,1e-4"
  tiny, largest = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
  for lr in learning_rates:
    if not isinstance(lr, int | float | np.floating) or isinstance(lr, bool):
      return f"has {lr!r}, which is not a number"
    if not (math.isfinite(lr) and lr > 0):
      return f"has {lr}; every learning rate must be finite and > 0"
    if not tiny <= lr <= largest:
      return (
        f"has {lr:g}, which is {'0' if lr < tiny else 'infinite'} in float32 (members train "
        f"in float32); every learning rate must lie in [{tiny:.3g}, {largest:.3g}]"
      )
  if len(set(learning_rates)) != len(learning_rates):
    return f"{list(learning_rates)} repeats a value"
  return None


@dataclasses.dataclass(frozen=True)
class Members:
  """A run's grid: every (learning rate, seed) pair, learning-rate major.

  Member ``i`` is ``list(members)[i]``: ``[(lr, seed) for lr in learning_rates for seed in
  seeds]``, the order of config.json, metrics.jsonl and every stacked state.

  Attributes:
    learning_rates: the peak learning rates, each finite, positive and a normal float32 (the
      members train in float32).
    seeds: the seeds, each an int32.
  """

  learning_rates: tuple[float, ...]
  seeds: tuple[int, ...]

  def __post_init__(self):
    lrs = tuple(float(lr) for lr in self.learning_rates)
    seeds = tuple(int(seed) for seed in self.seeds)
    object.__setattr__(self, "learning_rates", lrs)
    object.__setattr__(self, "seeds", seeds)
    if not seeds:
      raise ValueError("`seeds` is empty; give a count (e.g. 5) or a list of seeds (e.g. 0,1,2).")
    if len(set(seeds)) != len(seeds):
      raise ValueError(f"`seeds` {list(seeds)} repeats a seed; each seed must appear once.")
    info = np.iinfo(np.int32)
    for seed in seeds:
      if not info.min <= seed <= info.max:
        raise ValueError(f"`seeds` has {seed}; seeds are int32, from {info.min} to {info.max}.")
    problem = learning_rates_problem(lrs)
    if problem is not None:
      raise ValueError(f"`learning_rates` {problem}.")

  @classmethod
  def from_json(cls, members: Sequence[Mapping[str, Any]]) -> Members:
    """The grid of config.json's ``members`` list (which must be a whole lr-major grid)."""
    lrs = tuple(dict.fromkeys(float(m["learning_rate"]) for m in members))
    seeds = tuple(dict.fromkeys(int(m["seed"]) for m in members))
    grid = cls(lrs, seeds)
    if grid.to_json() != [{"seed": int(m["seed"]), "learning_rate": float(m["learning_rate"])}
                          for m in members]:  # fmt: skip
      raise ValueError(
        f"members {list(members)} are not a whole learning-rate-major grid of learning rates "
        f"{list(lrs)} x seeds {list(seeds)}."
      )
    return grid

  def __len__(self) -> int:
    return len(self.learning_rates) * len(self.seeds)

  def __iter__(self) -> Iterator[tuple[float, int]]:
    """``(learning_rate, seed)`` of each member, in member order."""
    return itertools.product(self.learning_rates, self.seeds)

  def to_json(self) -> list[dict[str, Any]]:
    """config.json's ``members``: ``[{"seed", "learning_rate"}]`` in member order."""
    return [{"seed": seed, "learning_rate": lr} for lr, seed in self]

  def describe(self) -> str:
    """The grid as its flags give it, in member order: ``lrs=[0.001, 0.0001] seeds=[1, 0]``."""
    return f"lrs={list(self.learning_rates)} seeds={list(self.seeds)}"
