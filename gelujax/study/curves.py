"""What a run's curves show, by fixed rules: instabilities, runs still improving when training
stopped, final values taken on a spike, and runs that do not learn.

Each rule reads one run's ``metrics.jsonl`` and ``summary.json`` (through
:class:`gelujax.study.runs.Run`) and returns plain facts; :mod:`gelujax.study.findings` words
them. The rules:

- *jump* (:func:`find_jumps`): at an evaluation, the training loss is more than
  ``JUMP_RATIO`` times the member's running minimum (the lowest value of its earlier
  evaluations); consecutive evaluations above that line are one jump, reported at its peak.
- *final value on a spike* (:func:`final_spikes`): the member's last evaluation is inside a
  jump, so every "final" value it reports was taken there.
- *still improving* (:func:`still_improving`): the median over the lr's members of the epoch of
  their best selection metric (e.g. validation loss) lies in the last fifth of training (after
  ``IMPROVING_AFTER`` of the last epoch): training stopped while the run was still improving.
  How many members have their best at the very last evaluation is stated.
- *does not learn* (:func:`not_learning`): the median over the lr's members of the test error
  at the best-selection epoch is above half the chance error 1 - 1/K of the data set's K
  classes: closer to guessing than to perfect.
- *still falling* (:func:`still_falling`): how much a metric fell over the last fifth of
  training (from each member's last evaluation at or before ``IMPROVING_AFTER`` of the last
  epoch to its last), as a share of its value there, median over the lr's members; a verdict on
  the metric's final value says so where that share is at least ``FALLING_SHARE`` (the
  *still improving* rule reads the selection metric, not the metric a hypothesis tests).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gelujax.paper import NUM_CLASSES
from gelujax.study import runs
from gelujax.study.runs import Run

# A member whose training loss exceeds this many times its running minimum is unstable there.
JUMP_RATIO = 2.0
# A run is still improving where its median best epoch lies after this share of the epochs.
IMPROVING_AFTER = 0.8
# A run does not learn where its median test error exceeds this share of the chance error.
NOT_LEARNING_SHARE = 0.5
# A metric still falls at the last epoch where its median fall over the last fifth of training
# is at least this share of its value at the start of that fifth.
FALLING_SHARE = 0.01


def find_jumps(
  run: Run, key: str = "train_loss", ratio: float = JUMP_RATIO
) -> list[dict[str, Any]]:
  """Where a member's ``key`` jumps far above its running minimum: an instability.

  Returns:
    One dict per jump, in member order then epoch: ``learning_rate``, ``seed``, ``epoch``,
    ``value``, ``running_min`` and ``ratio``, at the jump's highest ratio. Diverged (null)
    values are skipped.
  """
  jumps = []
  for member in run.members:
    running_min, inside = math.inf, False
    for r in runs.member_records(run, member, key):
      value = float(r[key])
      if math.isfinite(running_min) and value > ratio * running_min:
        jump = {
          "learning_rate": member["learning_rate"],
          "seed": member["seed"],
          "epoch": float(r["epoch"]),
          "value": value,
          "running_min": running_min,
          "ratio": value / running_min,
        }
        if not inside:
          jumps.append(jump)
        elif jump["ratio"] > jumps[-1]["ratio"]:
          jumps[-1] = jump
        inside = True
      else:
        inside = False
      running_min = min(running_min, value)
  return jumps


def final_spikes(
  run: Run, learning_rate: float, key: str = "train_loss", ratio: float = JUMP_RATIO
) -> list[dict[str, Any]]:
  """The members of ``learning_rate`` whose last evaluation of ``key`` is more than ``ratio``
  times the running minimum of their earlier ones: each a dict of ``seed``, ``epoch``,
  ``value``, ``running_min`` and ``ratio``."""
  spikes = []
  for member in runs.lr_members(run, learning_rate):
    records = runs.member_records(run, member, key)
    if member["diverged"] or len(records) < 2:
      continue
    last, lowest = float(records[-1][key]), min(float(r[key]) for r in records[:-1])
    if last > ratio * lowest:
      spikes.append(
        {
          "seed": member["seed"],
          "epoch": float(records[-1]["epoch"]),
          "value": last,
          "running_min": lowest,
          "ratio": last / lowest,
        }
      )
  return spikes


def still_improving(run: Run, learning_rate: float) -> dict[str, Any] | None:
  """Whether the median best epoch of the lr's non-diverged members lies after
  ``IMPROVING_AFTER`` of the last epoch: ``{"median", "at_last", "members", "epoch"}`` (the
  median best epoch, the members whose best is the last evaluation, the members, the last
  epoch), or None where it does not."""
  kept = [m for m in runs.lr_members(run, learning_rate) if not m["diverged"]]
  best = [float(m["best_epoch"]) for m in kept if m["best_epoch"] is not None]
  last = max((float(r["epoch"]) for r in run.records), default=math.nan)
  if not best or not float(np.median(best)) > IMPROVING_AFTER * last:
    return None
  return {
    "median": float(np.median(best)),
    "at_last": sum(1 for b in best if b == last),
    "members": len(best),
    "epoch": last,
  }


def not_learning(run: Run, learning_rate: float) -> dict[str, Any] | None:
  """Whether the lr's median test error at the best-selection epoch is above
  ``NOT_LEARNING_SHARE`` of the chance error: ``{"median", "chance", "classes", "low", "high",
  "train_low", "train_high"}`` (the test errors' median and range, the final training losses'
  range), or None where it is not, or the run is no classifier of a known data set."""
  classes = NUM_CLASSES.get(run.config["dataset"])
  kept = [m for m in runs.lr_members(run, learning_rate) if not m["diverged"]]
  errors = [runs.member_value(m, "best.test_error") for m in kept]
  errors = [e for e in errors if math.isfinite(e)]
  if classes is None or not errors:
    return None
  chance = 1.0 - 1.0 / classes
  if float(np.median(errors)) <= NOT_LEARNING_SHARE * chance:
    return None
  train = [runs.member_value(m, "final.train_loss") for m in kept]
  return {
    "median": float(np.median(errors)),
    "chance": chance,
    "classes": classes,
    "low": min(errors),
    "high": max(errors),
    "train_low": min(train),
    "train_high": max(train),
  }


def still_falling(run: Run, learning_rate: float, key: str) -> dict[str, Any] | None:
  """How much ``key`` fell over the last fifth of training at ``learning_rate``: per
  non-diverged member, (value at its last evaluation at or before ``IMPROVING_AFTER`` of the
  last epoch - value at its last evaluation) / the former.

  Returns:
    ``{"median", "low", "high", "start", "epoch", "members"}`` (the shares' median and range,
    the epochs the fifth runs from and to, the members), or None where no member has two
    evaluations of ``key`` with a non-zero value at the start.
  """
  last = max((float(r["epoch"]) for r in run.records), default=math.nan)
  shares, start = [], math.nan
  for member in runs.lr_members(run, learning_rate):
    records = runs.member_records(run, member, key)
    before = [r for r in records if float(r["epoch"]) <= IMPROVING_AFTER * last]
    if member["diverged"] or not before or before[-1] is records[-1]:
      continue
    begin, end = float(before[-1][key]), float(records[-1][key])
    if begin == 0.0:
      continue
    shares.append((begin - end) / begin)
    start = float(before[-1]["epoch"])
  if not shares:
    return None
  return {
    "median": float(np.median(shares)),
    "low": min(shares),
    "high": max(shares),
    "start": start,
    "epoch": last,
    "members": len(shares),
  }


def describe_curves(run: Run, learning_rates: list[float]) -> dict[str, Any]:
  """The curve facts of a run: every jump, and at each of ``learning_rates`` (the lrs its
  result reports) the members still improving, the final spikes, and whether it learns."""
  return {
    "jumps": find_jumps(run),
    "at": [
      {
        "learning_rate": lr,
        "improving": still_improving(run, lr),
        "spikes": final_spikes(run, lr),
        "not_learning": not_learning(run, lr),
      }
      for lr in learning_rates
    ],
  }
