"""Grids of runs through the trainer, and the paper's statistics read back from their files.

A *run* is one call of :func:`gelujax.trainer.fit`: one activation (and dropout setting) with its
whole learning-rate x seed grid trained as members. Everything after training reads only the
files the trainer writes (``config.json``, ``metrics.jsonl``, ``summary.json``), so a table can be
rebuilt on a machine that never trained.

Selection follows the paper: per run, the learning rate with the lowest **median** over seeds of
the selection metric (the task's ``select_metric``, e.g. the best validation loss of each member).
A diverged member counts as +inf in that median, so an lr where most members diverge loses to a
stable one, and an lr where every member diverged is never selected. Reported statistics (median,
mean and sample std over seeds) use the members that did not diverge, and every row carries its
diverged count so nothing is averaged away silently.

Comparisons between runs are exact two-sided Wilcoxon–Mann–Whitney rank-sum tests over seeds
(:func:`rank_test`), collected per report in a :class:`Family` whose p-values are adjusted by
Holm's step-down correction over all of its tests. Each test has one of three outcomes, each with
one fixed wording (:data:`OUTCOME_WORDS`): beyond the seed spread (Holm-adjusted p < 0.05),
p < 0.05 before correction only, or within the seed spread (p >= 0.05).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.members import Members
from gelujax.writers import CONFIG_FILE, SUMMARY_FILE, read_json, read_metrics

# A p-value (Holm-adjusted, for "beyond") below this is a difference beyond the seed spread.
ALPHA = 0.05
# A member whose training loss exceeds this many times its running minimum is reported.
JUMP_RATIO = 2.0
BEYOND, UNCORRECTED, WITHIN = "beyond", "uncorrected", "within"
# The one wording of each outcome of a rank-sum test, in every table and finding.
OUTCOME_WORDS = {
  BEYOND: "beyond the seed spread",
  UNCORRECTED: "p < 0.05 before correction only",
  WITHIN: "within the seed spread",
}


@dataclasses.dataclass(frozen=True)
class Run:
  """The files of one finished trainer workdir.

  Attributes:
    name: the run's name in tables and figures, e.g. ``"gelu_dropout0.5"``.
    workdir: where the files are.
    config: ``config.json``.
    summary: ``summary.json``.
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


@dataclasses.dataclass(frozen=True)
class Stats:
  """Median, mean and sample standard deviation over the members that did not diverge, and the
  values themselves (in seed order)."""

  median: float
  mean: float
  std: float
  n: int
  values: tuple[float, ...] = ()

  @classmethod
  def of(cls, values: Sequence[float]) -> Stats:
    if not values:
      return cls(math.nan, math.nan, math.nan, 0)
    x = np.asarray(values, np.float64)
    std = float(np.std(x, ddof=1)) if len(x) > 1 else math.nan
    return cls(float(np.median(x)), float(np.mean(x)), std, len(x), tuple(map(float, x)))


def rank_test(a: Sequence[float], b: Sequence[float]) -> float:
  """Exact two-sided p-value of the Wilcoxon–Mann–Whitney rank-sum test of samples ``a``, ``b``.

  The null distribution of ``a``'s rank sum is enumerated over every way of drawing ``len(a)`` of
  the pooled values (ties get mid-ranks), so the p-value is exact for any sample sizes and ties.
  With n values on each side and no overlap the p-value is its minimum, 2 / C(2n, n): 0.0079 for
  5 seeds, 0.1 for 3.
  """
  pooled = np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)])
  n, total = len(a), len(pooled)
  if n == 0 or n == total:
    return math.nan
  _, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
  ends = np.cumsum(counts)
  ranks2 = (2 * ends - counts + 1)[inverse]  # Twice the mid-ranks: integers.
  # ways[k, s]: subsets of k pooled values whose doubled ranks sum to s.
  ways = np.zeros((n + 1, int(ranks2.sum()) + 1))
  ways[0, 0] = 1.0
  for r in ranks2:
    ways[1:, r:] = ways[1:, r:] + ways[:-1, :-r]
  sums = np.arange(ways.shape[1])
  centre = n * (total + 1)  # The expected doubled rank sum.
  observed = abs(int(ranks2[:n].sum()) - centre)
  extreme = np.abs(sums - centre) >= observed
  return float(ways[n, extreme].sum() / ways[n].sum())


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
  """The run's directory name: the activation, plus ``_dropout<rate>`` for a dropout variant."""
  return activation if dropout is None else f"{activation}_dropout{dropout:g}"


def load_run(workdir: str | Path, name: str | None = None) -> Run:
  """Reads a finished workdir; ``name`` defaults to the directory's name."""
  workdir = Path(workdir)
  if not (workdir / SUMMARY_FILE).exists():
    raise ValueError(
      f"{workdir} has no {SUMMARY_FILE}: the run has not finished. Run (or resume) its grid "
      "with sweep.run_grid or experiments/reproduce.py first."
    )
  return Run(
    name=name or workdir.name,
    workdir=workdir,
    config=read_json(workdir / CONFIG_FILE),
    summary=read_json(workdir / SUMMARY_FILE),
    records=read_metrics(workdir),
  )


def finished_summary(workdir: str | Path, members: Members, epochs: int) -> dict[str, Any] | None:
  """The workdir's summary if it holds the grid ``members`` trained for ``epochs``, else None.

  A workdir that finished fewer epochs is not finished: the trainer resumes and extends it.

  Raises:
    ValueError: if the workdir holds other members, or more epochs than requested; resuming
      either would mix another grid into this one.
  """
  workdir = Path(workdir)
  for file in (SUMMARY_FILE, CONFIG_FILE):
    if (workdir / file).exists():
      found = Members.from_json(read_json(workdir / file)["members"])
      if found != members:
        raise ValueError(
          f"{workdir / file} holds a different grid ({found.describe()}) than the one "
          f"requested ({members.describe()}). Pass another --out for the new grid."
        )
  if not (workdir / SUMMARY_FILE).exists():
    return None
  summary = read_json(workdir / SUMMARY_FILE)
  if summary["epochs"] > epochs:
    raise ValueError(
      f"{workdir / SUMMARY_FILE} holds a run of {summary['epochs']} epochs, more than the "
      f"{epochs} requested. Pass --epochs {summary['epochs']} to use it, or another --out."
    )
  return summary if summary["epochs"] == epochs else None


def run_grid(
  spec: Any,
  workdir: str | Path,
  members: Members,
  *,
  data_dir: str | None = None,
  progress: bool = True,
) -> tuple[dict[str, Any], bool]:
  """Trains one run's grid ``members``, unless the workdir already finished it.

  A partial workdir (checkpoints but no summary for ``spec.epochs``) is resumed by the trainer.
  A grid whose members all diverge is a result too (every lr then shows n/n diverged).

  Returns:
    ``(summary, trained)``: the run's summary and whether this call trained.
  """
  summary = finished_summary(workdir, members, spec.epochs)
  if summary is not None:
    return summary, False
  # Imported here so that reading results and drawing tables needs no accelerator stack.
  from gelujax import trainer

  try:
    summary = trainer.fit(spec, str(workdir), members, data_dir=data_dir, progress=progress)
  except trainer.DivergedError:
    summary = read_json(Path(workdir) / SUMMARY_FILE)
  return summary, True


def _has_lr(member: dict[str, Any], learning_rate: float) -> bool:
  return math.isclose(member["learning_rate"], learning_rate, rel_tol=1e-9)


def _lr_members(run: Run, learning_rate: float) -> list[dict[str, Any]]:
  return [m for m in run.members if _has_lr(m, learning_rate)]


def _value(member: dict[str, Any], key: str) -> float:
  """``"best.test_error"`` -> member["best"]["test_error"], NaN when absent or null."""
  where, metric = key.split(".", 1)
  value = (member.get(where) or {}).get(metric)
  return math.nan if value is None else float(value)


def selection_metric(run: Run) -> str:
  """The task's ``select_metric``, or its test counterpart when the run has no validation split."""
  metric = run.config["spec"].get("select_metric", "validation_loss")
  if any(metric in r for r in run.records):
    return metric
  return metric.replace("validation", "test", 1)


def selection_values(run: Run, learning_rate: float, metric: str) -> list[float]:
  """Each member's best ``metric`` at the lr, in seed order; +inf for a diverged member."""
  values = [
    math.inf if m["diverged"] else _value(m, f"best.{metric}")
    for m in _lr_members(run, learning_rate)
  ]
  return [math.inf if math.isnan(v) else v for v in values]


def selection_median(values: Sequence[float | None]) -> float:
  """The median that selects an lr: over every member, a diverged one (+inf, or None as JSON
  holds it) included."""
  return statistics.median(math.inf if v is None else v for v in values)


def select_learning_rate(run: Run, metric: str | None = None) -> float | None:
  """The lr with the lowest median over seeds of each member's best ``metric``.

  Diverged members count as +inf; lrs whose members all diverged are never chosen. Ties go to the
  earlier lr of the grid.

  Returns:
    The selected learning rate, or None when every member of every lr diverged.
  """
  metric = metric or selection_metric(run)
  best_lr, best_median = None, math.inf
  for lr in run.learning_rates():
    if all(m["diverged"] for m in _lr_members(run, lr)):
      continue
    median = selection_median(selection_values(run, lr, metric))
    if best_lr is None or median < best_median:
      best_lr, best_median = lr, median
  return best_lr


def member_stats(run: Run, learning_rate: float) -> dict[str, Any]:
  """Statistics over the non-diverged members of one lr, for every best/final metric."""
  members = _lr_members(run, learning_rate)
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
    values = [v for v in (_value(m, key) for m in kept) if math.isfinite(v)]
    stats[key] = dataclasses.asdict(Stats.of(values))
  return {
    "learning_rate": learning_rate,
    "members": len(members),
    "diverged": len(members) - len(kept),
    "seeds": [m["seed"] for m in members],
    "best_epoch": Stats.of([m["best_epoch"] for m in kept]).median,
    "metrics": stats,
  }


def summarize_run(run: Run) -> dict[str, Any]:
  """One table row: every lr's :func:`member_stats` (the grid) and the selected lr's among them."""
  metric = selection_metric(run)
  selected = select_learning_rate(run, metric)
  grid = []
  for lr in run.learning_rates():
    stats = member_stats(run, lr)
    stats["select_median"] = stats["metrics"].get(f"best.{metric}", {}).get("median", math.nan)
    stats["select_values"] = selection_values(run, lr, metric)
    grid.append(stats)
  return {
    "run": run.name,
    "activation": run.activation,
    "dropout": run.dropout,
    "select_metric": metric,
    "selected": next((g for g in grid if g["learning_rate"] == selected), None),
    "grid": grid,
    "jumps": find_jumps(run),
  }


def find_jumps(
  run: Run, key: str = "train_loss", ratio: float = JUMP_RATIO
) -> list[dict[str, Any]]:
  """Where a member's ``key`` jumps far above its running minimum: an instability.

  The rule: at an evaluation, ``key`` is more than ``ratio`` times the member's running minimum
  (the lowest value of its earlier evaluations). Consecutive evaluations above that line are
  one jump, reported at its highest ratio. Diverged (null) values are skipped.

  Returns:
    One dict per jump, in member order then epoch: ``learning_rate``, ``seed``, ``epoch``,
    ``value``, ``running_min`` and ``ratio``.
  """
  jumps = []
  for member in run.members:
    lr, seed = member["learning_rate"], member["seed"]
    records = sorted(
      (r for r in run.records if r["seed"] == seed and _has_lr(r, lr) and r.get(key) is not None),
      key=lambda r: r["epoch"],
    )
    running_min, current = math.inf, None
    for r in records:
      value = float(r[key])
      if math.isfinite(running_min) and value > ratio * running_min:
        jump = {
          "learning_rate": lr,
          "seed": seed,
          "epoch": float(r["epoch"]),
          "value": value,
          "running_min": running_min,
          "ratio": value / running_min,
        }
        if current is None:
          jumps.append(jump)
        elif jump["ratio"] > jumps[-1]["ratio"]:
          jumps[-1] = jump
        current = jump
      else:
        current = None
      running_min = min(running_min, value)
  return jumps


def at_learning_rate(row: dict[str, Any], learning_rate: float) -> dict[str, Any] | None:
  """The row's grid entry for ``learning_rate`` (None when the grid lacks it)."""
  return next((g for g in row["grid"] if _has_lr(g, learning_rate)), None)


def median_curve(run: Run, key: str, learning_rate: float) -> Curve | None:
  """``key`` (e.g. ``"train_loss"``) against epoch over the lr's non-diverged members.

  Returns:
    The curve, or None when the lr has no non-diverged member logging ``key``.
  """
  kept = {
    (m["seed"], m["learning_rate"]) for m in _lr_members(run, learning_rate) if not m["diverged"]
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


def diverged_label(row: dict[str, Any]) -> str:
  """``"2/5 diverged"``, or ``""`` when no member of the selected lr diverged."""
  selected = row["selected"]
  if selected is None:
    total = sum(g["members"] for g in row["grid"])
    return f"{total}/{total} diverged"
  if selected["diverged"]:
    return f"{selected['diverged']}/{selected['members']} diverged"
  return ""


def format_number(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
  """A table cell: ``value * scale`` to ``digits`` significant digits; NaN/None -> ``"–"``."""
  if value is None or not math.isfinite(value):
    return "–"
  return f"{value * scale:.{digits}g}"


def unstable_label(row: dict[str, Any], stats: dict[str, Any]) -> str:
  """``"1/5"``: members of ``stats``'s lr with a training-loss jump (:func:`find_jumps`)."""
  seeds = {j["seed"] for j in row.get("jumps", []) if _has_lr(j, stats["learning_rate"])}
  return f"{len(seeds)}/{stats['members']}"


def format_table(
  rows: Sequence[dict[str, Any]],
  *,
  metric: str,
  label: str,
  scale: float = 1.0,
  paper: Mapping[str, float] | None = None,
  extra: Sequence[tuple[str, str, float]] = (),
  selection: Mapping[str, str] | None = None,
) -> str:
  """A Markdown table: per run the lr shown, diverged and unstable members, the paper's number
  and ours.

  Args:
    rows: :func:`summarize_run` rows; each shows its ``selected`` lr.
    metric: the reported statistic, e.g. ``"best.test_error"``.
    label: its column heading, e.g. ``"test error (%)"``.
    scale: multiplies every value shown (100 for percent).
    paper: the paper's value by run name (unscaled, like ours); runs absent from it show "–".
    extra: further ``(metric, heading, scale)`` columns, shown as medians.
    selection: run name -> a last column on how its lr was selected.
  """
  paper = paper or {}
  head = ["run", "lr", "diverged", "unstable", f"paper {label}", f"median {label}"]
  head += [f"mean ± std {label}", *[heading for _, heading, _ in extra]]
  if selection is not None:
    head.append("lr selection")
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in rows:
    selected = row["selected"]
    if selected is None:
      cells = [
        row["run"],
        "–",
        diverged_label(row),
        "–",
        format_number(paper.get(row["run"]), scale),
      ]
      cells += ["–"] * (len(head) - len(cells))
    else:
      stats = selected["metrics"].get(metric, dataclasses.asdict(Stats.of([])))
      cells = [
        row["run"],
        f"{selected['learning_rate']:g}",
        diverged_label(row) or f"0/{selected['members']}",
        unstable_label(row, selected),
        format_number(paper.get(row["run"]), scale),
        format_number(stats["median"], scale),
        f"{format_number(stats['mean'], scale)} ± {format_number(stats['std'], scale, 2)}",
      ]
      for key, _, extra_scale in extra:
        cells.append(format_number(selected["metrics"].get(key, {}).get("median"), extra_scale))
      if selection is not None:
        cells.append(selection.get(row["run"], "–"))
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def tied_values(a: Sequence[float], b: Sequence[float]) -> int:
  """How many distinct values occur more than once among ``a`` and ``b`` pooled: seeds whose
  values :func:`rank_test` gives a shared mid-rank."""
  _, counts = np.unique(
    np.concatenate([np.asarray(a, float), np.asarray(b, float)]), return_counts=True
  )
  return int((counts > 1).sum())


def holm(p_values: Sequence[float]) -> list[float]:
  """Holm's step-down adjusted p-values: the i-th smallest of m p-values times (m - i + 1),
  made non-decreasing in that order and capped at 1. A test is significant at level alpha
  under Holm's correction exactly where its adjusted p-value is below alpha."""
  p = np.asarray(p_values, np.float64)
  order = np.argsort(p, kind="stable")
  scaled = (len(p) - np.arange(len(p))) * p[order]
  adjusted = np.empty_like(p)
  adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
  return adjusted.tolist()


def smallest_p(n: int, m: int | None = None) -> float:
  """The smallest two-sided p-value of the exact rank-sum test with n and m values a side."""
  m = n if m is None else m
  return 2.0 / math.comb(n + m, n)


@dataclasses.dataclass
class Test:
  """One exact rank-sum test between two runs' per-seed values of one metric.

  Attributes:
    scope: where the values come from, e.g. ``"dropout 0, selected lr"``.
    metric: the metric's heading.
    a, b: the runs' names.
    values_a, values_b: their per-seed values.
    p: the two-sided p-value (:func:`rank_test`).
    ties: distinct values shared by several of the pooled seeds (given mid-ranks).
    holm: the Holm-adjusted p-value over the test's :class:`Family`, once corrected.
  """

  scope: str
  metric: str
  a: str
  b: str
  values_a: tuple[float, ...]
  values_b: tuple[float, ...]
  p: float
  ties: int
  holm: float = math.nan

  @property
  def outcome(self) -> str:
    """:data:`BEYOND`, :data:`UNCORRECTED` or :data:`WITHIN`."""
    if math.isnan(self.holm):
      raise ValueError(f"{self.describe_pair()}: the family has not been corrected yet.")
    if self.holm < ALPHA:
      return BEYOND
    return UNCORRECTED if self.p < ALPHA else WITHIN

  @property
  def apart(self) -> bool:
    """Whether the two runs' seed ranges do not overlap."""
    return max(self.values_a) < min(self.values_b) or min(self.values_a) > max(self.values_b)

  def describe_pair(self) -> str:
    return f"{self.a} vs {self.b} ({self.metric}, {self.scope})"

  def statistics(self) -> str:
    """``"p = 0.0079, Holm 0.65, no seed overlaps, 1 tied value"``."""
    notes = [f"p = {self.p:.2g}", f"Holm {self.holm:.2g}"]
    if self.apart:
      notes.append("no seed overlaps")
    if self.ties:
      notes.append(f"{self.ties} tied value{'s' if self.ties > 1 else ''} (mid-ranks)")
    return ", ".join(notes)

  def verdict(self) -> str:
    """``"within the seed spread (p = 0.31, Holm 1)"``: the outcome's words and statistics."""
    return f"{OUTCOME_WORDS[self.outcome]} ({self.statistics()})"

  def to_json(self) -> dict[str, Any]:
    return {
      "scope": self.scope,
      "metric": self.metric,
      "a": self.a,
      "b": self.b,
      "values_a": list(self.values_a),
      "values_b": list(self.values_b),
      "p": self.p,
      "holm": self.holm,
      "ties": self.ties,
      "outcome": self.outcome,
    }


class Family:
  """The rank-sum tests of one report, for Holm's correction over all of them.

  A test is identified by its scope, metric and pair of runs: asked for twice (a ranking's
  neighbours may also be a GELU-baseline pair), it is one test, counted once.
  """

  def __init__(self) -> None:
    self._tests: dict[tuple[str, str, str, str], Test] = {}
    self.corrected = False

  def test(
    self,
    scope: str,
    metric: str,
    a: tuple[str, Sequence[float]],
    b: tuple[str, Sequence[float]],
  ) -> Test:
    """The test of run ``a`` against run ``b``, each ``(name, per-seed values)``."""
    if self.corrected:
      raise ValueError("Tests cannot join a family after its correction.")
    key = (scope, metric, *sorted((a[0], b[0])))
    if key not in self._tests:
      values_a = tuple(map(float, a[1]))
      values_b = tuple(map(float, b[1]))
      self._tests[key] = Test(
        scope,
        metric,
        a[0],
        b[0],
        values_a,
        values_b,
        rank_test(values_a, values_b),
        tied_values(values_a, values_b),
      )
    return self._tests[key]

  @property
  def tests(self) -> list[Test]:
    return list(self._tests.values())

  def correct(self) -> None:
    """Sets every test's Holm-adjusted p-value over the whole family."""
    for test, adjusted in zip(self.tests, holm([t.p for t in self.tests]), strict=True):
      test.holm = adjusted
    self.corrected = True


@dataclasses.dataclass
class Ranking:
  """Runs ordered by their median of one metric, best first; each tested against the one above.

  Attributes:
    scope: where the values come from, e.g. ``"dropout 0, lr 0.001"``.
    metric: the metric's heading, with units.
    order: ``(run, per-seed values)``, best median first.
    tests: ``tests[i]`` compares ``order[i]`` with ``order[i + 1]``.
    scale: multiplies the values shown (100 for percent).
    lower_is_better: False for accuracies.
  """

  scope: str
  metric: str
  order: list[tuple[str, tuple[float, ...]]]
  tests: list[Test]
  scale: float = 1.0
  lower_is_better: bool = True

  def median(self, run: str) -> float:
    return float(np.median(dict(self.order)[run]))


def rank(
  family: Family,
  scope: str,
  metric: str,
  values: Mapping[str, Sequence[float]],
  *,
  scale: float = 1.0,
  lower_is_better: bool = True,
) -> Ranking:
  """Ranks runs by their median of ``values`` (run -> per-seed values; runs without values are
  left out), best first, and tests each against the run above it in ``family``."""
  sign = 1.0 if lower_is_better else -1.0
  kept = [(run, tuple(map(float, v))) for run, v in values.items() if len(v)]
  order = sorted(kept, key=lambda item: sign * float(np.median(item[1])))
  tests = [family.test(scope, metric, order[i], order[i + 1]) for i in range(len(order) - 1)]
  return Ranking(scope, metric, order, tests, scale, lower_is_better)


def selected_values(rows: Sequence[dict[str, Any]], key: str) -> dict[str, list[float]]:
  """Run name -> the per-seed values of ``key`` (e.g. ``"best.test_error"``) at the selected lr
  of each :func:`summarize_run` row; runs without a selected lr or without ``key`` are left out."""
  values = {}
  for row in rows:
    stats = (row["selected"] or {}).get("metrics", {}).get(key)
    if stats is not None and stats["n"] > 0:
      values[row["run"]] = list(stats["values"])
  return values


def format_rankings(rankings: Sequence[Ranking]) -> str:
  """A Markdown table of rankings: per run its rank, median and seed range, and the test
  against the run ranked just above it (p, Holm-adjusted p and the outcome's words)."""
  lines = [
    "| metric | rank | run | median | seed range | against the run above |",
    "|---|---|---|---|---|---|",
  ]
  for ranking in rankings:
    for i, (run, values) in enumerate(ranking.order):
      above = ranking.tests[i - 1].verdict() if i else ""
      scale = ranking.scale
      lines.append(
        f"| {ranking.metric if i == 0 else ''} | {i + 1} | {run} | "
        f"{format_number(float(np.median(values)), scale)} | "
        f"{format_number(min(values), scale)}–{format_number(max(values), scale)} | {above} |"
      )
  return "\n".join(lines) + "\n"


def format_grid(
  rows: Sequence[dict[str, Any]], *, metric: str, label: str, scale: float = 1.0
) -> str:
  """A Markdown table of every lr of every run: diverged and unstable members, the median
  selection metric (which picks the lr) and the median of ``metric`` (labelled ``label``, times
  ``scale``)."""
  lines = [
    f"| run | lr | diverged | unstable | median best selection metric | median {label} |",
    "|---|---|---|---|---|---|",
  ]
  for row in rows:
    for g in row["grid"]:
      mark = " (selected)" if g is row["selected"] else ""
      value = g["metrics"].get(metric, {}).get("median")
      lines.append(
        f"| {row['run']} | {g['learning_rate']:g}{mark} | {g['diverged']}/{g['members']} | "
        f"{unstable_label(row, g)} | {format_number(g['select_median'])} "
        f"({row['select_metric']}) | {format_number(value, scale)} |"
      )
  return "\n".join(lines) + "\n"


def evaluate_noise(
  workdir: str | Path,
  *,
  learning_rate: float,
  levels: Sequence[float],
  data_dir: str | None = None,
  noise_seed: int = 0,
) -> dict[str, Any]:
  """Test accuracy and log loss of a run's classifiers under Unif[-a, a] pixel noise (Fig. 3).

  Every member at ``learning_rate`` is restored from the workdir's checkpoint and evaluated on
  the test images scaled to [0, 1] plus uniform noise of each level, without clipping; diverged
  members are left out and counted. One noise
  draw per level is shared by all members (and, with the same ``noise_seed``, by all runs), so
  activations are compared on identical images.

  Returns:
    ``{"learning_rate", "members", "diverged", "levels": [A], "seeds": [S], "accuracy": [S][A],
    "loss": [S][A]}`` over the S non-diverged members.
  """
  # Imported here so that reading results and drawing tables needs no accelerator stack.
  from gelujax import data, trainer

  workdir = Path(workdir)
  members = read_json(workdir / SUMMARY_FILE)["members"]
  at_lr = [i for i, m in enumerate(members) if _has_lr(m, learning_rate)]
  if not at_lr:
    raise ValueError(
      f"{workdir} has no member with learning rate {learning_rate}; its members' learning rates "
      f"are {sorted({m['learning_rate'] for m in members})}."
    )
  index = [i for i in at_lr if not members[i]["diverged"]]
  spec, _, state = trainer.restore(str(workdir), data_dir=data_dir)
  test = spec.load_data(data_dir)["test"]
  if test["inputs"].dtype != np.uint8:
    raise ValueError(
      f"{workdir} holds a {spec.name!r} run: the noise evaluation needs an image classifier "
      f"(uint8 pixels), as mnist's; its test inputs are {test['inputs'].dtype}."
    )
  clean = data.scale_pixels(test["inputs"])
  rng = np.random.default_rng(noise_seed)
  accuracy, loss = [], []
  for a in levels:
    metrics = trainer.evaluate_members(
      spec, state, {**test, "inputs": data.add_uniform_noise(clean, float(a), rng)}
    )
    if "error" not in metrics:
      raise ValueError(
        f"{workdir} holds a {spec.name!r} run, which is not a classifier (its metrics are "
        f"{sorted(metrics)}): the noise evaluation reports accuracy."
      )
    accuracy.append(1.0 - np.asarray(metrics["error"], np.float64)[index])
    loss.append(np.asarray(metrics["loss"], np.float64)[index])
  return {
    "learning_rate": learning_rate,
    "members": len(at_lr),
    "diverged": len(at_lr) - len(index),
    "levels": [float(a) for a in levels],
    "seeds": [members[i]["seed"] for i in index],
    "accuracy": np.stack(accuracy, axis=1).tolist(),
    "loss": np.stack(loss, axis=1).tolist(),
  }


def noise_curve(result: Mapping[str, Any], key: str) -> Curve:
  """``"accuracy"`` or ``"loss"`` of :func:`evaluate_noise` against noise level, over seeds."""
  values = np.asarray(result[key], np.float64)  # [seeds, levels]
  return Curve(
    x=np.asarray(result["levels"], np.float64),
    median=np.median(values, axis=0),
    low=values.min(axis=0),
    high=values.max(axis=0),
    members=values.shape[0],
  )


def noise_values(result: Mapping[str, Any], key: str, a: float) -> list[float]:
  """Each seed's ``key`` at noise level ``a``, linearly interpolated between levels."""
  return [float(np.interp(a, result["levels"], seed)) for seed in result[key]]


def noise_at(result: Mapping[str, Any], key: str, a: float) -> float:
  """The median over seeds of :func:`noise_values`: each seed's ``key`` at noise level ``a``
  (interpolated between evaluated levels), then the median, as the rankings take it."""
  return float(np.median(noise_values(result, key, a)))


def format_noise_table(
  results: Mapping[str, Mapping[str, Any]],
  *,
  at: Sequence[float] = (0.0, 1.0, 3.0),
  paper: Mapping[str, Mapping[float, float]] | None = None,
) -> str:
  """A Markdown table of median test accuracy and log loss at noise levels ``at``.

  Args:
    results: run name -> :func:`evaluate_noise` result.
    at: the noise levels shown (interpolated when between evaluated levels).
    paper: run name -> noise level -> the paper's accuracy, shown beside ours.
  """
  paper = paper or {}
  head = ["run", "lr", "diverged"]
  head += [f"accuracy a={a:g} (paper)" for a in at] + [f"log loss a={a:g}" for a in at]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for name, result in results.items():
    cells = [name, f"{result['learning_rate']:g}", f"{result['diverged']}/{result['members']}"]
    for a in at:
      ours = format_number(noise_at(result, "accuracy", a), digits=3)
      theirs = paper.get(name, {}).get(a)
      cells.append(ours if theirs is None else f"{ours} ({theirs:g})")
    cells += [format_number(noise_at(result, "loss", a), digits=3) for a in at]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"
