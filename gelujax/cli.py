"""Parsing of the list-valued flags shared by the scripts in experiments/.

The scripts own their absl flags; these functions turn the raw values of ``flags.DEFINE_list``
into what ``gelujax`` takes, and apply flags to a task's spec, with one-line errors that name
the flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gelujax import workdir
from gelujax.tasks import SpecError, TaskSpec


def replace_spec(spec: TaskSpec, flag_values: Mapping[str, tuple[str, Any]]) -> TaskSpec:
  """``spec.replace`` with ``{field: (flag, value)}``, skipping unset (None) values.

  ``TaskSpec`` checks every value; a bad one is reported under its flag's name:
  ``--dropout 1.5 is not valid for task 'mnist': expected a drop rate in [0, 1) ...``.
  """
  overrides = {field: value for field, (_, value) in flag_values.items() if value is not None}
  try:
    return spec.replace(**overrides)
  except SpecError as e:
    if e.field not in flag_values:
      raise
    flag = flag_values[e.field][0]
    raise ValueError(
      f"--{flag} {e.value!r} is not valid for task {spec.name!r}: expected {e.expected}."
    ) from None


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
  workdir.check_member_count(seeds[0])  # Before the list is made: 99999999999999 fails here.
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
