"""A member's best evaluation, by one rule with a named tie rule, as every study reads it.

A member's best evaluation is the one with the lowest finite value of a metric (``metrics.jsonl``
holds a value that is not finite as null). Where several epochs tie on it, the tie rule names
which is taken: :data:`EARLIEST`, the trainer's (`gelujax.workdir.summarize` writes the first of
the tied records into ``summary.json`` as ``best_epoch``) and every design's, or :data:`LATEST`
(exploratory: `gelujax.study.confirm.tie_sensitivity`). :func:`best_record` reads a member's
records; :func:`tied_members` lists the members whose best ties; :func:`at_last_epoch` reads the
trainer's ``best_epoch`` to list the members still improving when their run stopped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.study import runs

EARLIEST, LATEST = "earliest", "latest"
TIES = (EARLIEST, LATEST)
# Each tie rule in words, as a README states it.
TIE_WORDS = {EARLIEST: "the earliest of the tied epochs", LATEST: "the latest of the tied epochs"}


def tied_records(records: Sequence[Mapping[str, Any]], metric: str) -> list[Mapping[str, Any]]:
  """The records of ``records`` (in epoch order) with the lowest finite ``metric``, in epoch
  order: more than one where epochs tie on it; none without any finite value."""
  found = [r for r in records if r.get(metric) is not None and math.isfinite(r[metric])]
  if not found:
    return []
  lowest = min(r[metric] for r in found)
  return [r for r in found if r[metric] == lowest]


def best_record(
  records: Sequence[Mapping[str, Any]], metric: str, tie: str = EARLIEST
) -> Mapping[str, Any] | None:
  """The record of ``records`` (in epoch order) with the lowest finite ``metric``: of those
  that tie on it, the earliest (``tie="earliest"``, the trainer's rule) or the latest; None
  without any finite value.

  Raises:
    ValueError: ``tie`` is not one of :data:`TIES`.
  """
  if tie not in TIES:
    raise ValueError(f"tie rule {tie!r}: expected one of {', '.join(TIES)}.")
  tied = tied_records(records, metric)
  if not tied:
    return None
  return tied[-1] if tie == LATEST else tied[0]


def tied_members(
  run: runs.Run, learning_rate: float, metric: str
) -> dict[int, list[Mapping[str, Any]]]:
  """seed -> its tied records (:func:`tied_records`), for each member of ``run`` at
  ``learning_rate`` whose lowest ``metric`` is reached at several epochs (diverged members
  left out), in seed order."""
  found = {}
  for m in runs.lr_members(run, learning_rate):
    if m["diverged"]:
      continue
    tied = tied_records(runs.member_records(run, m, metric), metric)
    if len(tied) > 1:
      found[m["seed"]] = tied
  return found


def at_last_epoch(run: runs.Run, learning_rate: float) -> list[int]:
  """The seeds of ``run``'s members at ``learning_rate`` whose best epoch (the trainer's) is the
  run's last (a run still improving when it stopped), diverged members left out."""
  return [
    m["seed"]
    for m in runs.lr_members(run, learning_rate)
    if not m["diverged"] and m["best_epoch"] == run.summary["epochs"]
  ]
