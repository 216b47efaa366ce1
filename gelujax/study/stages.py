"""The stages of a study's result, read from its runs' files: each selection grid, its
summary and candidates, its evaluation runs, the per-seed values the verdicts are computed on
(:class:`Stages`, :func:`run_stages`), and what a result writes beside its README
(:class:`Result`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax.paper import (
  REFERENCES,
  Design,
  Report,
  design,
  hypotheses,
)
from gelujax.study import curves, evidence, grids, runs
from gelujax.study.analysis import Analysis
from gelujax.study.grids import Grid
from gelujax.study.runs import Run, RunRow
from gelujax.workdir import SUMMARY_FILE
from gelujax.workdir.config import ACTIVATION_SOURCE, MODEL_SOURCE


@dataclasses.dataclass
class Result:
  """What a reproduction writes beside its README.

  Attributes:
    settings: :func:`read_settings` of the runs.
    report: what the table reports (None for the noise experiment).
    analysis: the verdicts and everything exploratory.
    table: table.md's text.
    files: the README's list of files.
    findings: :func:`gelujax.study.findings.write_findings`.
    values: the rows of values.csv (`gelujax.study.exports`).
  """

  settings: dict[str, Any]
  report: Report | None
  analysis: Analysis
  table: str
  files: list[str]
  findings: dict[str, list[str]]
  values: list[dict[str, str]] = dataclasses.field(default_factory=list)


def read_settings(
  task: str,
  selection: Sequence[Run],
  evaluation: Sequence[Run],
  references: Sequence[str] = REFERENCES,
) -> dict[str, Any]:
  """What the runs were trained with, read from their config.json files (the seeds and lrs of
  their members, the epochs of their specs), and the ``references`` their result compares every
  other activation with (`gelujax.study.analysis.exploratory`)."""
  first = selection[0]
  for run in selection[1:]:
    if run.learning_rates() != first.learning_rates() or run.seeds() != first.seeds():
      raise ValueError(
        f"{run.workdir} holds lrs {run.learning_rates()} x seeds {run.seeds()}, but "
        f"{first.workdir} holds lrs {first.learning_rates()} x seeds {first.seeds()}: the runs of "
        "one result must share their grid. Retrain one of them, or move it to another `out`."
      )
  spec = first.config["spec"]
  sources, models = activation_sources(selection), model_sources(selection)
  return {
    "task": task,
    "dataset": first.config["dataset"],
    "spec": spec,
    "epochs": first.summary["epochs"],
    "activations": list(dict.fromkeys(run.activation for run in selection)),
    "dropout_rates": list(dict.fromkeys(run.dropout for run in selection)),
    "learning_rates": first.learning_rates(),
    "seeds": first.seeds(),
    "evaluation_seeds": list(dict.fromkeys(s for run in evaluation for s in run.seeds())),
    **({"activation_sources": sources} if sources else {}),
    **({"model_sources": models} if models else {}),
    "references": list(references),
  }


def activation_sources(selection: Sequence[Run]) -> dict[str, dict[str, str]]:
  """Where each of the runs' own activations came from (a user's ``module:function``, or one
  registered by a script), as their config.json records it: ``{activation: {"module",
  "function", "file", "sha256", "folder"}}``, ``folder`` the one the module was imported from
  (the folder holding its top-level package), which its result's commands must import it from
  again."""
  return _sources(selection, ACTIVATION_SOURCE, lambda run: run.activation)


def model_sources(selection: Sequence[Run]) -> dict[str, dict[str, str]]:
  """Where the runs' model of the user's own (``module:Class``) came from, as their
  config.json records it: ``{model: {"module", "function", "file", "sha256", "folder"}}``, as
  :func:`activation_sources`; empty for gelujax's own models."""
  return _sources(selection, MODEL_SOURCE, lambda run: run.config["spec"]["model"])


def _sources(selection: Sequence[Run], field: str, name) -> dict[str, dict[str, str]]:
  sources = {}
  for run in selection:
    source = run.config.get(field)
    if not source or not source.get("file"):
      continue
    file = Path(source["file"])
    # A module a.b is a/b.py or a/b/__init__.py below the folder it was imported from.
    depth = source["module"].count(".") + (file.name == "__init__.py")
    sources[name(run)] = {
      "module": source["module"],
      "function": source["function"],
      "file": str(file),
      "sha256": source.get("sha256"),
      "folder": str(file.parents[depth]) if depth < len(file.parents) else str(file.parent),
    }
  return sources


def reported_lrs(row: RunRow, plan: Design) -> list[float]:
  """The lrs of a selection grid that its result reports: the selected one, or every lr."""
  if not plan.select_lr:
    return [g.learning_rate for g in row.grid]
  return [row.selected.learning_rate] if row.selected else []


def summarize(run: Run, learning_rates: Sequence[float]) -> RunRow:
  """A run's row (:func:`gelujax.study.runs.summarize_run`) with its curve facts at the lrs
  its result reports."""
  described = curves.describe_curves(run, list(learning_rates))
  return dataclasses.replace(runs.summarize_run(run), curves=described)


def curve_facts(rows: Sequence[RunRow]) -> list[tuple[str, float | None, str, Any]]:
  """Every curve fact of the rows, as :attr:`Analysis.curves` holds them."""
  facts = []
  for row in rows:
    for at in row.curves["at"]:
      lr = at["learning_rate"]
      if at["not_learning"]:
        facts.append((row.run, lr, "not_learning", at["not_learning"]))
      if at["improving"]:
        facts.append((row.run, lr, "improving", at["improving"]))
      facts += [(row.run, lr, "spike", spike) for spike in at["spikes"]]
  for row in rows:
    facts += [(row.run, None, "jump", jump) for jump in row.curves["jumps"]]
  return facts


def load_evaluation(grid: Grid, row: RunRow, plan: Design) -> Run | str:
  """A selection grid's evaluation run (``grid`` is the evaluation grid), or why it cannot be
  used (``"pending: ..."``)."""
  if not (grid.workdir / SUMMARY_FILE).exists():
    return evidence.PENDING_EVALUATION
  run = runs.load_run(grid.workdir)
  found = run.learning_rates()
  if len(found) != len(grid.learning_rates) or not all(
    runs.same_lr(a, b) for a, b in zip(found, grid.learning_rates, strict=False)
  ):
    which = "grid"
    if plan.select_lr:
      which = "selected lr" if grid.name == runs.evaluation_name(row.run) else "candidate lr"
    return (
      f"pending: {grid.workdir.name} holds lrs {found}, not the {which} "
      f"{list(grid.learning_rates)}: retrain it"
    )
  shared = sorted(set(run.seeds()) & set(row.grid[0].seeds))
  if plan.select_lr and shared:
    return f"pending: {grid.workdir.name} shares seeds {shared} with the selection grid"
  return run


# A selection grid's evaluation runs: each evaluation grid (None: there is none, for the reason
# given) with its run or why it cannot be used.


Evaluations = list[tuple[Grid | None, Run | str]]


@dataclasses.dataclass(frozen=True)
class Stages:
  """A result's runs: the selection grids (and their rows), the design they are judged by, and
  each grid's evaluation runs (the selected lr's first; each one's run or why it is not there,
  ``"pending: ..."``; ``[]`` where the result has no evaluation runs)."""

  selection: list[Run]
  rows: list[RunRow]
  plan: Design
  evaluated: dict[str, Evaluations]

  def evaluation_runs(self) -> list[Run]:
    """Every evaluation run that is there, grid by grid."""
    return [r for found in self.evaluated.values() for _, r in found if isinstance(r, Run)]


def run_stages(
  task: str,
  selection_grids: Sequence[Grid],
  out: Path,
  *,
  seeds: Sequence[int],
  evaluation_seeds: Sequence[int],
  data_dir: str | None,
  train: bool,
) -> Stages:
  """Trains (with ``train``) the selection grids, then each one's evaluation runs at its
  selected lr and its other candidate lrs, and reads them back. A result has evaluation runs
  where it trains some (``evaluation_seeds``), or, rendered, where its design asks for them or
  some are there."""
  if train:
    grids.train_grids(selection_grids, seeds=seeds, data_dir=data_dir, out=out)
  selection = [runs.load_run(g.workdir, g.name) for g in selection_grids]
  plan = design(task, len(selection[0].seeds()))
  rows = [summarize(run, reported_lrs(runs.summarize_run(run), plan)) for run in selection]
  evaluation_grids = grids.evaluation_grids(task, selection_grids, rows, plan)
  if train and evaluation_seeds:
    grids.train_grids(evaluation_grids, seeds=evaluation_seeds, data_dir=data_dir, out=out)
  expected = bool(evaluation_seeds) if train else bool(plan.evaluation_seeds)
  expected = expected or any(g.workdir.exists() for g in evaluation_grids)
  if not expected:
    no_runs = dataclasses.replace(plan, evaluation_seeds=())
    return Stages(selection, rows, no_runs, {row.run: [] for row in rows})
  by_run: dict[str, list[Grid]] = {}
  for g in evaluation_grids:
    by_run.setdefault(runs.evaluated_run(g.name), []).append(g)
  evaluated: dict[str, Evaluations] = {}
  for row in rows:
    found = by_run.get(row.run)
    evaluated[row.run] = (
      [(g, load_evaluation(g, row, plan)) for g in found]
      if found
      else [(None, "pending: every selection member diverged")]
    )
  found = [s for r in Stages(selection, rows, plan, evaluated).evaluation_runs() for s in r.seeds()]
  seeds_found = tuple(dict.fromkeys(found)) or tuple(evaluation_seeds) or plan.evaluation_seeds
  return Stages(selection, rows, dataclasses.replace(plan, evaluation_seeds=seeds_found), evaluated)


def grid_values(row: RunRow) -> dict[float, dict[str, dict[int, float]]]:
  """lr -> metric key -> seed -> the value of each of a row's non-diverged members."""
  return {
    g.learning_rate: {k: dict(zip(s.seeds, s.values, strict=True)) for k, s in g.metrics.items()}
    for g in row.grid
  }


def evaluation_values(
  found: Evaluations, values: dict[str, dict[float, dict[str, dict[int, float]]]]
) -> dict[float, dict[str, dict[int, float]] | str] | str:
  """A run's :attr:`gelujax.study.evidence.RunValues.evaluation`: lr -> the values of its
  evaluation run there (``values``: evaluation run name -> its :func:`grid_values`), or why
  there are none; the reason alone where the run has no evaluation grid."""
  if len(found) == 1 and found[0][0] is None:
    return found[0][1]
  evaluation: dict[float, dict[str, dict[int, float]] | str] = {}
  for grid, run in found:
    if isinstance(run, Run):
      evaluation.update(values[run.name])
    else:
      evaluation.update({lr: run for lr in grid.learning_rates})
  return evaluation


def curve_caveats(
  task: str, tested: Sequence[tuple[float, Sequence[Run]]]
) -> dict[float, dict[str, Any]]:
  """lr -> what the curves of the runs whose values are tested at that lr show, as
  :attr:`gelujax.study.evidence.RunValues.facts` holds it."""
  keys = {h.metric.split(".", 1)[1] for h in hypotheses(task) if h.metric.startswith("final.")}
  facts = {}
  for lr, found in tested:
    if not found:
      continue
    merged = runs.merge_runs(found, found[0].name)
    falling = {key: curves.still_falling(merged, lr, key) for key in sorted(keys)}
    facts[lr] = {
      "falling": {key: fact for key, fact in falling.items() if fact is not None},
      "not_learning": curves.not_learning(merged, lr),
    }
  return facts


def tested_runs(selection: Run, found: Evaluations, plan: Design) -> list[tuple[float, list[Run]]]:
  """Per lr, the runs whose values the hypotheses test there: the evaluation run at that lr, or,
  where nothing is selected, the selection grid and its evaluation run together."""
  evaluation = [r for _, r in found if isinstance(r, Run)]
  if not plan.select_lr:
    return [(lr, [selection, *evaluation]) for lr in selection.learning_rates()]
  return [(lr, [run]) for run in evaluation for lr in run.learning_rates()]
