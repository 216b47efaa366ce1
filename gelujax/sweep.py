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
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.writers import CONFIG_FILE, SUMMARY_FILE, read_json, read_metrics


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


def grid_members(seeds: Sequence[int], learning_rates: Sequence[float]) -> list[tuple[float, int]]:
  """The trainer's member order: lr-major ``[(lr, seed) for lr in lrs for seed in seeds]``."""
  return [(float(lr), int(seed)) for lr in learning_rates for seed in seeds]


def _members_of(doc: dict[str, Any]) -> list[tuple[float, int]]:
  return [(float(m["learning_rate"]), int(m["seed"])) for m in doc["members"]]


def finished_summary(
  workdir: str | Path, *, seeds: Sequence[int], learning_rates: Sequence[float], epochs: int
) -> dict[str, Any] | None:
  """The workdir's summary if it holds this grid trained for ``epochs``, else None.

  A workdir that finished fewer epochs is not finished: the trainer resumes and extends it.

  Raises:
    ValueError: if the workdir holds other members, or more epochs than requested; resuming
      either would mix another grid into this one.
  """
  workdir = Path(workdir)
  wanted = grid_members(seeds, learning_rates)
  for file in (SUMMARY_FILE, CONFIG_FILE):
    if (workdir / file).exists():
      found = _members_of(read_json(workdir / file))
      if found != wanted:
        raise ValueError(
          f"{workdir / file} holds a different grid (members (lr, seed) {found}) than the one "
          f"requested ({wanted}). Pass another --out, or delete that workdir to train the new "
          "grid."
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
  *,
  seeds: Sequence[int],
  learning_rates: Sequence[float],
  data_dir: str | None = None,
  progress: bool = True,
) -> tuple[dict[str, Any], bool]:
  """Trains one run's lr x seed grid as members, unless the workdir already finished it.

  A partial workdir (checkpoints but no summary for ``spec.epochs``) is resumed by the trainer.
  A grid whose members all diverge is a result too (every lr then shows n/n diverged).

  Returns:
    ``(summary, trained)``: the run's summary and whether this call trained.
  """
  summary = finished_summary(
    workdir, seeds=seeds, learning_rates=learning_rates, epochs=spec.epochs
  )
  if summary is not None:
    return summary, False
  # Imported here so that reading results and drawing tables needs no accelerator stack.
  from gelujax import trainer

  try:
    summary = trainer.fit(
      spec,
      str(workdir),
      trainer.Members(learning_rates, seeds),
      data_dir=data_dir,
      progress=progress,
    )
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
    members = _lr_members(run, lr)
    if all(m["diverged"] for m in members):
      continue
    values = [math.inf if m["diverged"] else _value(m, f"best.{metric}") for m in members]
    median = statistics.median(math.inf if math.isnan(v) else v for v in values)
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
    grid.append(stats)
  return {
    "run": run.name,
    "activation": run.activation,
    "dropout": run.dropout,
    "select_metric": metric,
    "selected": next((g for g in grid if g["learning_rate"] == selected), None),
    "grid": grid,
  }


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


def format_table(
  rows: Sequence[dict[str, Any]],
  *,
  metric: str,
  label: str,
  scale: float = 1.0,
  paper: Mapping[str, float] | None = None,
  extra: Sequence[tuple[str, str, float]] = (),
) -> str:
  """A Markdown table: per run the selected lr, diverged members, the paper's number and ours.

  Args:
    rows: :func:`summarize_run` rows.
    metric: the reported statistic, e.g. ``"best.test_error"``.
    label: its column heading, e.g. ``"test error (%)"``.
    scale: multiplies every value shown (100 for percent).
    paper: the paper's value by run name (unscaled, like ours); runs absent from it show "–".
    extra: further ``(metric, heading, scale)`` columns, shown as medians.
  """
  paper = paper or {}
  head = ["run", "lr", "diverged", f"paper {label}", f"median {label}", f"mean ± std {label}"]
  head += [heading for _, heading, _ in extra]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in rows:
    selected = row["selected"]
    diverged = diverged_label(row) or f"0/{selected['members']}"
    if selected is None:
      cells = [row["run"], "–", diverged, format_number(paper.get(row["run"]), scale)]
      cells += ["–"] * (len(head) - len(cells))
    else:
      stats = selected["metrics"].get(metric, dataclasses.asdict(Stats.of([])))
      cells = [
        row["run"],
        f"{selected['learning_rate']:g}",
        diverged,
        format_number(paper.get(row["run"]), scale),
        format_number(stats["median"], scale),
        f"{format_number(stats['mean'], scale)} ± {format_number(stats['std'], scale, 2)}",
      ]
      for key, _, extra_scale in extra:
        cells.append(format_number(selected["metrics"].get(key, {}).get("median"), extra_scale))
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def _compare(better: Sequence[float], worse: Sequence[float]) -> str:
  """A ranking cell: the rank test of two runs' seeds and what it says."""
  p = rank_test(better, worse)
  if p < 0.05:
    separated = max(better) < min(worse) or min(better) > max(worse)
    return f"p = {p:.2g}: beyond the seed spread" + (", no seed overlaps" if separated else "")
  return f"p = {p:.2g}: within the seed spread"


@dataclasses.dataclass(frozen=True)
class Ranked:
  """One metric to rank runs by: its per-seed values for every run.

  Attributes:
    heading: the metric's name in the table, with units.
    values: run name -> the metric over its seeds (non-diverged members).
    scale: multiplies the values shown (100 for percent).
    lower_is_better: False for accuracies.
  """

  heading: str
  values: Mapping[str, Sequence[float]]
  scale: float = 1.0
  lower_is_better: bool = True


def selected_values(rows: Sequence[dict[str, Any]], key: str) -> dict[str, list[float]]:
  """Run name -> the per-seed values of ``key`` (e.g. ``"best.test_error"``) at the selected lr
  of each :func:`summarize_run` row; runs without a selected lr or without ``key`` are left out."""
  values = {}
  for row in rows:
    stats = (row["selected"] or {}).get("metrics", {}).get(key)
    if stats is not None and stats["n"] > 0:
      values[row["run"]] = list(stats["values"])
  return values


def format_ranking(metrics: Sequence[Ranked]) -> str:
  """A Markdown table ranking the runs by their median of each metric, best first; each run is
  tested (:func:`rank_test`) against the run just above it and against the first."""
  lines = [
    "| metric | rank | run | median | seed range | against the run above | against rank 1 |",
    "|---|---|---|---|---|---|---|",
  ]
  for metric in metrics:
    sign = 1.0 if metric.lower_is_better else -1.0
    ranked = sorted(metric.values.items(), key=lambda item: sign * float(np.median(item[1])))
    for rank, (run, values) in enumerate(ranked, 1):
      above = _compare(ranked[rank - 2][1], values) if rank > 1 else ""
      first = _compare(ranked[0][1], values) if rank > 2 else ""
      lines.append(
        f"| {metric.heading if rank == 1 else ''} | {rank} | {run} | "
        f"{format_number(float(np.median(values)), metric.scale)} | "
        f"{format_number(min(values), metric.scale)}–{format_number(max(values), metric.scale)} "
        f"| {above} | {first} |"
      )
  return "\n".join(lines) + "\n"


def format_grid(
  rows: Sequence[dict[str, Any]], *, metric: str, label: str, scale: float = 1.0
) -> str:
  """A Markdown table of every lr of every run: diverged members, the median selection metric
  (which picks the lr) and the median of ``metric`` (labelled ``label``, times ``scale``)."""
  lines = [
    f"| run | lr | diverged | median best selection metric | median {label} |",
    "|---|---|---|---|---|",
  ]
  for row in rows:
    for g in row["grid"]:
      mark = " (selected)" if g is row["selected"] else ""
      value = g["metrics"].get(metric, {}).get("median")
      lines.append(
        f"| {row['run']} | {g['learning_rate']:g}{mark} | {g['diverged']}/{g['members']} | "
        f"{format_number(g['select_median'])} ({row['select_metric']}) | "
        f"{format_number(value, scale)} |"
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
  """The median-over-seeds ``key`` at noise level ``a``, linearly interpolated between levels."""
  curve = noise_curve(result, key)
  return float(np.interp(a, curve.x, curve.median))


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
