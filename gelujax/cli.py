"""Parsing of the list-valued flags shared by the scripts in experiments/.

The scripts own their absl flags; these functions turn the raw values of ``flags.DEFINE_list``
into what ``gelujax`` takes, with one-line errors that name the flag.
"""

from __future__ import annotations

from collections.abc import Sequence


def parse_seeds(values: Sequence[str] | None, default_count: int) -> list[int]:
  """``--seeds``: one integer is a count (``5`` -> 0..4); several (or one followed by a comma,
  ``7,``) are the seeds themselves; unset gives the task's count."""
  if not values:
    return list(range(default_count))
  text = ",".join(values)
  try:
    seeds = [int(v) for v in values if v.strip()]
  except ValueError:
    seeds = []
  if not seeds:
    raise ValueError(f"--seeds {text!r} is not a count or a comma list of integer seeds.")
  if len(values) > 1:
    return seeds
  if seeds[0] < 1:
    raise ValueError(f"--seeds {text!r} is a count of seeds; it must be at least 1.")
  return list(range(seeds[0]))


def parse_floats(flag: str, values: Sequence[str] | None, default: Sequence[float]) -> list[float]:
  """A list flag of numbers (``--learning_rates=1e-3,1e-4``); unset gives ``default``."""
  if not values:
    return [float(v) for v in default]
  try:
    return [float(v) for v in values]
  except ValueError:
    raise ValueError(
      f"--{flag} {','.join(values)!r} is not a list of numbers; pass e.g. 1e-3,1e-4."
    ) from None
