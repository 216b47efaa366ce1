"""The GELU forms study's swaps (kept by `gelujax.study.wrong_form.keep_swaps` in
``swaps/<run>.json``): every network's change of test error and loss when run with another form,
or in another dtype, read per lr and metric, in tables and findings."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gelujax import workdir as workdirs
from gelujax.study import forms, numbers, runs, stats
from gelujax.study.forms import Design

SWAP_KEYS = (("error", "test error (points)", 100.0), ("loss", "test log loss (nats)", 1.0))


@dataclasses.dataclass(frozen=True)
class Swap:
  """The change when networks trained with ``arm`` in ``dtype`` at ``learning_rate`` are
  evaluated with ``activation`` in ``to_dtype``: per network, swapped minus own."""

  arm: str
  dtype: str
  activation: str
  to_dtype: str
  learning_rate: float
  key: str
  changes: tuple[float, ...]

  @property
  def shift(self) -> float:
    return stats.walsh_median(self.changes)

  @property
  def interval(self) -> tuple[float, float, float]:
    return stats.paired_interval(self.changes)


def read_swaps(design: Design, out: Path) -> list[Swap]:
  """Every swap kept in ``out/swaps/``, per lr and metric (diverged networks left out)."""
  found = []
  for dtype in design.dtypes:
    for arm in design.arms:
      path = forms.swap_path(out, design.run_name(arm, dtype))
      if not path.exists():
        continue
      kept = workdirs.read_json(path)
      own, *others = kept["evaluations"]
      for other in others:
        for lr in design.learning_rates:
          index = [i for i, m in enumerate(kept["members"]) if runs.same_lr(m["learning_rate"], lr)]
          for key, *_ in SWAP_KEYS:
            changes = tuple(
              other[key][i] - own[key][i]
              for i in index
              if other[key][i] is not None and own[key][i] is not None
            )
            found.append(Swap(arm, dtype, other["activation"], other["dtype"], lr, key, changes))
  return found


def swap_table(design: Design, swaps: Sequence[Swap], key: str, scale: float) -> list[str]:
  """One metric's swap changes: a row per (trained, evaluated) pair, a column per lr."""
  lines = [
    "| trained with | evaluated with | "
    + " | ".join(f"lr {lr:g}: change [interval]; largest |change|" for lr in design.learning_rates)
    + " |",
    "|---|---|" + "---|" * len(design.learning_rates),
  ]
  rows: dict[tuple[str, str, str, str], dict[float, Swap]] = {}
  for s in swaps:
    if s.key == key:
      rows.setdefault((s.arm, s.dtype, s.activation, s.to_dtype), {})[s.learning_rate] = s
  for (arm, dtype, activation, to_dtype), by_lr in rows.items():
    cells = []
    for lr in design.learning_rates:
      s = by_lr.get(lr)
      if s is None or not s.changes:
        cells.append(numbers.DASH)
        continue
      low, high, _ = s.interval
      largest = max(abs(c) for c in s.changes) * scale
      shift, low, high = (numbers.signed(v, scale=scale) for v in (s.shift, low, high))
      cells.append(f"{shift} [{low}, {high}]; {largest:.3g}")
    lines.append(f"| {arm}, {dtype} | {activation}, {to_dtype} | " + " | ".join(cells) + " |")
  return lines


def swap_groups(swaps: Sequence[Swap]) -> dict[str, list[Swap]]:
  """The swaps by direction: one group per (trained with, evaluated with) pair of forms, each
  network in its own dtype (``"gelu → gelu_sigmoid"``), then one per arm and change of dtype
  (``"relu, float32 → bfloat16"``), so that no group pools a swap with its opposite."""
  forms_first = sorted(swaps, key=lambda s: s.dtype != s.to_dtype)  # stable: the design's order
  groups: dict[str, list[Swap]] = {}
  for s in forms_first:
    if s.dtype == s.to_dtype:
      label = f"{s.arm} → {s.activation}, each network in its own dtype"
    else:
      label = f"{s.arm}, {s.dtype} → {s.to_dtype}"
    groups.setdefault(label, []).append(s)
  return groups


def swap_findings(design: Design, swaps: Sequence[Swap]) -> list[str]:
  """What each direction of swap changed (:func:`swap_groups`), per metric: the median change
  over its networks (every lr and dtype), how many went up and down, the range, and whether the
  largest change lies beyond the study's margin for that metric."""
  margins = {m.key: m for m in design.metrics}
  lines = []
  for label, chosen in swap_groups(swaps).items():
    parts, networks = [], 0
    for key, words, scale in SWAP_KEYS:
      changes = np.asarray([c for s in chosen if s.key == key for c in s.changes])
      if not len(changes):
        continue
      networks = max(networks, len(changes))
      low, high = changes.min() * scale, changes.max() * scale
      part = (
        f"{words} median {numbers.signed(float(np.median(changes)) * scale)}, "
        f"{int((changes > 0).sum())} up and {int((changes < 0).sum())} down, from "
        f"{numbers.signed(low)} to {numbers.signed(high)}"
      )
      metric = margins.get(f"best.test_{key}")
      if metric is not None and not metric.log:
        margin = metric.shown(metric.margin)
        beyond = int((np.abs(changes) * scale > margin * (1 + 1e-9)).sum())
        if beyond:
          part += f", {beyond} beyond the study's margin ±{margin:.3g}"
      parts.append(part)
    scope = (
      "every lr, seed and dtype" if len({s.dtype for s in chosen}) > 1 else "every lr and seed"
    )
    if parts:
      lines.append(f"Swap {label} ({networks} networks: {scope}): " + "; ".join(parts) + ".")
  return lines
