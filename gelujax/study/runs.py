"""A study's runs, read back from the files the trainer writes, and their learning rates.

A *run* is one call of :func:`gelujax.engine.fit`: one activation (and dropout setting) with
its whole learning-rate x seed grid trained as members. Everything here reads only the files the
trainer writes, so a result can be rebuilt on a machine that never trained: every value from
``metrics.jsonl`` (with ``config.json``), the records a finished run made, each of them; the
run's ``summary.json`` only marks it finished, and what it holds is derived again from the
records (`gelujax.workdir.derive_summary`), which are refused where they lack an evaluation.

Selection follows the paper: per run, the learning rate with the lowest **median** over seeds
of the selection metric (the task's ``select_metric``, e.g. each member's best validation
loss). A diverged member counts as +inf in that median, so an lr where most members diverge
loses to a stable one, and an lr where every member diverged is never selected. Reported
statistics (median, mean and sample std over seeds) use the members that did not diverge, and
every row carries its diverged count so nothing is averaged away silently.

The selected lr is not always told apart from the others by the selection seeds. Its
*candidates* (:func:`candidate_lrs`, the rule of ``gelujax.paper.DESIGN_CHANGES``) are the
selected lr and every lr, not wholly diverged, whose per-seed best selection metric the exact
rank-sum test does not distinguish from the selected lr's (p >= ``CANDIDATE_ALPHA``).
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.paper import CANDIDATE_ALPHA
from gelujax.study.stats import Stats, rank_test
from gelujax.workdir import (
  CONFIG_FILE,
  SUMMARY_FILE,
  derive_summary,
  folder_name,
  read_json,
  read_metrics,
)

# A run trained on evaluation seeds at the lr selected on another run's (selection) seeds is
# named like that run, with this suffix; one at another candidate lr also ends in
# ``_lr<lr>`` (``gelu_tanh_eval_lr0.001``).
EVAL_SUFFIX = "_eval"
_EVALUATION_NAME = re.compile(rf"^(?P<run>.+){EVAL_SUFFIX}(_lr(?P<lr>[^_/]+))?$")


def evaluation_name(run: str, learning_rate: float | None = None) -> str:
  """The evaluation run of ``run``: ``<run>_eval`` at the selected lr (``learning_rate`` None),
  ``<run>_eval_lr<lr>`` at another candidate lr."""
  return run + EVAL_SUFFIX + ("" if learning_rate is None else f"_lr{learning_rate:g}")


def evaluated_run(name: str) -> str | None:
  """The selection grid an evaluation run's ``name`` belongs to (None: not an evaluation run)."""
  match = _EVALUATION_NAME.match(name)
  return match["run"] if match else None


@dataclasses.dataclass(frozen=True)
class Run:
  """The files of one finished trainer workdir.

  Attributes:
    name: the run's name in tables and figures, e.g. ``"gelu_dropout0.5"``.
    workdir: where the files are.
    config: ``config.json``.
    summary: its ``summary.json`` as the run wrote it from ``records``, derived from them again
      (`gelujax.workdir.derive_summary`), never read from the file.
    records: the lines of ``metrics.jsonl``, in file order.
  """

  name: str
  workdir: Path
  config: dict[str, Any]
  summary: dict[str, Any]
  records: list[dict[str, Any]]

  @property
  def activation(self) -> str:
    return self.config["activation"]

  @property
  def dropout(self) -> float:
    return float(self.config["spec"]["dropout"])

  @property
  def members(self) -> list[dict[str, Any]]:
    return self.summary["members"]

  def learning_rates(self) -> list[float]:
    """The grid's learning rates, in member order."""
    return list(dict.fromkeys(m["learning_rate"] for m in self.members))

  def seeds(self) -> list[int]:
    """The grid's seeds, in member order."""
    return list(dict.fromkeys(m["seed"] for m in self.members))


@dataclasses.dataclass(frozen=True)
class Curve:
  """A metric over the non-diverged members of one learning rate, against epoch or noise level.

  Attributes:
    x: [T] evaluation epochs (or noise levels).
    median: [T] median over members at each epoch.
    low: [T] minimum over members.
    high: [T] maximum over members.
    members: how many members the statistics are over.
  """

  x: np.ndarray
  median: np.ndarray
  low: np.ndarray
  high: np.ndarray
  members: int


def run_name(activation: str, dropout: float | None = None) -> str:
  """The run's directory name: the activation, plus ``_dropout<rate>`` for a dropout variant,
  made a folder's name as train.py makes its own (`gelujax.workdir.folder_name`:
  ``myacts:squareplus`` -> ``myacts_squareplus``)."""
  return folder_name(activation if dropout is None else f"{activation}_dropout{dropout:g}")


def finished(out: Path, folders: Mapping[str, str]) -> dict[str, Run]:
  """A study's finished runs in ``out/runs``, each read once: key -> its files, for each key of
  ``folders`` (key -> its run's folder) whose run wrote its summary; the one way every study
  fixed in code reads its runs."""
  return {
    key: load_run(path)
    for key, folder in folders.items()
    if (path := Path(out) / "runs" / folder).joinpath(SUMMARY_FILE).exists()
  }


def load_run(workdir: str | Path, name: str | None = None) -> Run:
  """Reads a finished workdir; ``name`` defaults to the directory's name.

  Raises:
    ValueError: the run has not finished (no summary.json), or its metrics.jsonl is not every
      evaluation it made (`gelujax.workdir.check_finished`).
  """
  workdir = Path(workdir)
  if not (workdir / SUMMARY_FILE).exists():
    raise ValueError(
      f"{workdir} has no {SUMMARY_FILE}: the run has not finished. Run (or resume) it with "
      "experiments/reproduce.py first."
    )
  config, records = read_json(workdir / CONFIG_FILE), read_metrics(workdir)
  return Run(
    name=name or workdir.name,
    workdir=workdir,
    config=config,
    summary=derive_summary(workdir, config, records),
    records=records,
  )


def merge_runs(found: Sequence[Run], name: str) -> Run:
  """The members and records of several runs (a grid and its evaluation run: different seeds)
  as one run named ``name``, with the first one's config."""
  first = found[0]
  return Run(
    name=name,
    workdir=first.workdir,
    config=first.config,
    summary={**first.summary, "members": [m for run in found for m in run.members]},
    records=[r for run in found for r in run.records],
  )


def same_lr(a: float, b: float) -> bool:
  """Whether two learning rates are the same (as JSON round-trips them)."""
  return math.isclose(a, b, rel_tol=1e-9)


def lr_members(run: Run, learning_rate: float) -> list[dict[str, Any]]:
  """The run's members at ``learning_rate``, in seed order."""
  return [m for m in run.members if same_lr(m["learning_rate"], learning_rate)]


def member_value(member: dict[str, Any], key: str) -> float:
  """``"best.test_error"`` -> member["best"]["test_error"], NaN when absent or null."""
  where, metric = key.split(".", 1)
  value = (member.get(where) or {}).get(metric)
  return math.nan if value is None else float(value)


def values(
  run: Run,
  key: str,
  learning_rate: float | None = None,
  read: Callable[[dict[str, Any]], float] | None = None,
) -> dict[float, dict[int, float]]:
  """The one way a study reads a run's per-seed values: lr -> seed -> each member's ``key``
  (:func:`member_value`: ``"best.test_error"``), NaN for a diverged member; at
  ``learning_rate`` alone where given; ``read(member)`` reads each value instead (another tie
  rule's best, from the member's records)."""
  found: dict[float, dict[int, float]] = {}
  members = run.members if learning_rate is None else lr_members(run, learning_rate)
  for m in members:
    value = math.nan if m["diverged"] else (read(m) if read else member_value(m, key))
    found.setdefault(m["learning_rate"], {})[m["seed"]] = value
  return found


def lr_values(
  run: Run, key: str, learning_rate: float, read: Callable[[dict[str, Any]], float] | None = None
) -> dict[int, float]:
  """:func:`values` at one lr: seed -> value, in seed order (empty where no member has it)."""
  return next(iter(values(run, key, learning_rate, read).values()), {})


def selection_metric(run: Run) -> str:
  """The task's ``select_metric``, or its test counterpart when the run has no validation split."""
  metric = run.config["spec"].get("select_metric", "validation_loss")
  if any(metric in r for r in run.records):
    return metric
  return metric.replace("validation", "test", 1)


def selection_values(run: Run, learning_rate: float, metric: str) -> list[float]:
  """Each member's best ``metric`` at the lr, in seed order; +inf for a diverged member."""
  values = [
    math.inf if m["diverged"] else member_value(m, f"best.{metric}")
    for m in lr_members(run, learning_rate)
  ]
  return [math.inf if math.isnan(v) else v for v in values]


def selection_median(values: Sequence[float | None]) -> float:
  """The median that selects an lr: over every member, a diverged one (+inf, or None as JSON
  holds it) included."""
  return statistics.median(math.inf if v is None else v for v in values)


def choose_lr(medians: Mapping[float, float | None]) -> float | None:
  """The one rule by which every study selects a learning rate: the lr of the lowest median
  (``None``: every member of that lr diverged, never chosen; a diverged member counts as +inf
  within a median); where medians are equal, the smaller lr. None where no lr is left."""
  kept = [(median, lr) for lr, median in medians.items() if median is not None]
  return min(kept)[1] if kept else None


def select_learning_rate(run: Run, metric: str | None = None) -> float | None:
  """The lr of ``run`` with the lowest median over seeds of each member's best ``metric``, by
  :func:`choose_lr` (diverged members count as +inf; lrs whose members all diverged are never
  chosen; ties go to the smaller lr).

  Returns:
    The selected learning rate, or None when every member of every lr diverged.
  """
  metric = metric or selection_metric(run)
  return choose_lr(
    {
      lr: None
      if all(m["diverged"] for m in lr_members(run, lr))
      else selection_median(selection_values(run, lr, metric))
      for lr in run.learning_rates()
    }
  )


@dataclasses.dataclass(frozen=True)
class SeedStats(Stats):
  """`Stats` of one metric over an lr's non-diverged members, with each value's seed."""

  seeds: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class LrRow:
  """One learning rate of a run's grid: its members, and statistics over those that did not
  diverge.

  Attributes:
    learning_rate: the lr.
    members: its members, diverged ones included.
    diverged: how many diverged.
    seeds: every member's seed, in member order.
    best_epoch: the median best epoch of the non-diverged members.
    metrics: ``"best.test_error"``, ``"final.train_loss"``, ... -> their `SeedStats`.
    select_median: the median of the selection metric (`selection_median`).
    select_values: each member's best selection metric, +inf for a diverged one.
    candidate_p: the rank-sum p of its selection values against the selected lr's
      (`candidate_lrs`; None for the selected lr, a wholly diverged one, or none selected).
  """

  learning_rate: float
  members: int
  diverged: int
  seeds: list[int]
  best_epoch: float
  metrics: dict[str, SeedStats]
  select_median: float = math.nan
  select_values: list[float] = dataclasses.field(default_factory=list)
  candidate_p: float | None = None

  def values(self, key: str) -> list[float]:
    """The per-seed values of ``key`` (e.g. ``"best.test_error"``); [] where it has none."""
    stats = self.metrics.get(key)
    return list(stats.values) if stats else []

  def median(self, key: str) -> float | None:
    """The median of ``key``, None where it has none."""
    stats = self.metrics.get(key)
    return stats.median if stats else None


@dataclasses.dataclass(frozen=True)
class RunRow:
  """A run's row: every lr of its grid (`LrRow`), the one selected, and its candidates.

  Attributes:
    run: the run's name.
    activation: its activation spec.
    dropout: its dropout rate.
    epochs: the epochs it trained.
    select_metric: the metric that selects its lr (`selection_metric`).
    selected: the selected lr's entry of ``grid`` (None: every member diverged).
    grid: every lr, in grid order.
    candidates: the candidate lrs (`candidates`), the selected one first.
    curves: the facts of its loss curves at the lrs its result reports
      (`gelujax.study.curves.describe_curves`), where the study adds them.
  """

  run: str
  activation: str
  dropout: float
  epochs: int
  select_metric: str
  selected: LrRow | None
  grid: list[LrRow]
  candidates: list[float]
  curves: dict[str, Any] | None = None

  def at(self, learning_rate: float) -> LrRow | None:
    """The grid's entry for ``learning_rate`` (None when the grid lacks it)."""
    return next((g for g in self.grid if same_lr(g.learning_rate, learning_rate)), None)

  def values(self, learning_rate: float | None, key: str) -> list[float]:
    """The per-seed values of ``key`` of the non-diverged members at ``learning_rate`` (None:
    the selected lr); [] where the row has none."""
    entry = self.selected if learning_rate is None else self.at(learning_rate)
    return entry.values(key) if entry else []

  def with_selected(self, learning_rate: float | None) -> RunRow:
    """The row with ``learning_rate``'s entry shown as its selected one (where the grid has
    it)."""
    entry = None if learning_rate is None else self.at(learning_rate)
    return dataclasses.replace(self, selected=entry or self.selected)

  def to_json(self) -> dict[str, Any]:
    """The row as summary.json holds it (``curves`` only where the study added them)."""
    row = dataclasses.asdict(self)
    if self.curves is None:
      del row["curves"]
    return row


def member_stats(run: Run, learning_rate: float) -> LrRow:
  """Statistics over the non-diverged members of one lr, for every best/final metric."""
  members = lr_members(run, learning_rate)
  kept = [m for m in members if not m["diverged"]]
  keys = sorted(
    {
      f"{where}.{metric}"
      for m in kept
      for where in ("best", "final")
      for metric in m.get(where, {})
    }
  )
  stats = {}
  for key in keys:
    seeded = [(m["seed"], member_value(m, key)) for m in kept]
    seeded = [(seed, v) for seed, v in seeded if math.isfinite(v)]
    found = Stats.of([v for _, v in seeded])
    stats[key] = SeedStats(**dataclasses.asdict(found), seeds=tuple(seed for seed, _ in seeded))
  return LrRow(
    learning_rate=learning_rate,
    members=len(members),
    diverged=len(members) - len(kept),
    seeds=[m["seed"] for m in members],
    best_epoch=Stats.of([m["best_epoch"] for m in kept]).median,
    metrics=stats,
  )


def summarize_run(run: Run) -> RunRow:
  """One table row: every lr's :func:`member_stats` (the grid) and the selected lr's among them."""
  metric = selection_metric(run)
  selected = select_learning_rate(run, metric)
  grid = []
  for lr in run.learning_rates():
    stats = member_stats(run, lr)
    median = stats.median(f"best.{metric}")
    grid.append(
      dataclasses.replace(
        stats,
        select_median=math.nan if median is None else median,
        select_values=selection_values(run, lr, metric),
      )
    )
  found = candidate_lrs(grid, selected)
  grid = [dataclasses.replace(g, candidate_p=found.get(g.learning_rate)) for g in grid]
  return RunRow(
    run=run.name,
    activation=run.activation,
    dropout=run.dropout,
    epochs=run.summary["epochs"],
    select_metric=metric,
    selected=next((g for g in grid if g.learning_rate == selected), None),
    grid=grid,
    candidates=candidates(found, selected),
  )


def candidates(found: dict[float, float | None], selected: float | None) -> list[float]:
  """The candidate lrs of :func:`candidate_lrs`'s ``found``: the selected lr, then each lr
  whose p against it is at least ``CANDIDATE_ALPHA``, in grid order."""
  return [
    lr for lr, p in found.items() if lr == selected or (p is not None and p >= CANDIDATE_ALPHA)
  ]


def candidate_lrs(grid: Sequence[LrRow], selected: float | None) -> dict[float, float | None]:
  """Each lr of a selection grid -> the exact two-sided rank-sum p of its per-seed best
  selection metric against the selected lr's (None for the selected lr itself and for an lr
  whose members all diverged), the selected lr first, then the grid's order. Its candidates
  are the selected lr and the lrs with p >= ``CANDIDATE_ALPHA``; none where nothing is
  selected."""
  if selected is None:
    return {}
  chosen = next(g for g in grid if same_lr(g.learning_rate, selected))
  best = [math.inf if v is None else v for v in chosen.select_values]
  found: dict[float, float | None] = {chosen.learning_rate: None}
  for g in grid:
    if g is chosen:
      continue
    values = [math.inf if v is None else v for v in g.select_values]
    whole = g.diverged == g.members
    found[g.learning_rate] = None if whole else rank_test(values, best)
  return found


def median_curve(run: Run, key: str, learning_rate: float) -> Curve | None:
  """``key`` (e.g. ``"train_loss"``) against epoch over the lr's non-diverged members.

  Returns:
    The curve, or None when the lr has no non-diverged member logging ``key``.
  """
  kept = {
    (m["seed"], m["learning_rate"]) for m in lr_members(run, learning_rate) if not m["diverged"]
  }
  by_epoch: dict[float, list[float]] = {}
  for r in run.records:
    if (r["seed"], r["learning_rate"]) in kept and r.get(key) is not None:
      by_epoch.setdefault(float(r["epoch"]), []).append(float(r[key]))
  if not by_epoch:
    return None
  epochs = np.array(sorted(by_epoch))
  values = [np.asarray(by_epoch[e]) for e in epochs]
  return Curve(
    x=epochs,
    median=np.array([np.median(v) for v in values]),
    low=np.array([v.min() for v in values]),
    high=np.array([v.max() for v in values]),
    members=len(kept),
  )


def member_records(run: Run, member: dict[str, Any], key: str) -> list[dict[str, Any]]:
  """A member's records that hold ``key`` (not null), in epoch order."""
  return sorted(
    (
      r
      for r in run.records
      if r["seed"] == member["seed"]
      and same_lr(r["learning_rate"], member["learning_rate"])
      and r.get(key) is not None
    ),
    key=lambda r: r["epoch"],
  )
