"""One of the paper's experiments end to end: selection grids -> selected lrs -> evaluation
seeds -> verdicts, tables, figures, README.

Each run's selection grid is trained into ``<out>/runs/<run>/`` (:mod:`gelujax.study.grids`);
each run's lr is selected on those seeds; its evaluation run, fresh seeds at that lr, is
trained into ``<out>/runs/<run>_eval/``, and the same seeds at each other candidate lr
(``gelujax.paper.DESIGN_CHANGES``) into ``<out>/runs/<run>_eval_lr<lr>/``; then, from the
workdir files alone, ``<out>`` receives ``table.md``, ``summary.json``, the figure PNG(s) and a
``README.md`` that opens with the task's hypotheses and their verdicts. :func:`render` trains
nothing and rebuilds a result from the files already there; a hypothesis whose evaluation run
is absent or unfinished is *pending*.

A task named ``<classifier>_noise`` (``mnist_noise``) trains nothing new when the classifier
task's no-dropout runs exist beside ``<out>`` (``<out>/../mnist/runs/``): it restores the
evaluation classifiers (and the selection classifiers, at each lr some run selected, where
their checkpoints are kept) and evaluates them on noisy test images.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax import tasks
from gelujax.paper import (
  NOISE_SUFFIX,
  PAPER,
  PAPER_NOISE_ACCURACY,
  Design,
  Report,
  design,
  hypotheses,
)
from gelujax.study import analysis, curves, findings, grids, noise, plots, readme, runs, tables
from gelujax.study import baselines as lookups
from gelujax.study.analysis import Analysis, RunValues
from gelujax.study.grids import Grid
from gelujax.study.runs import EVAL_SUFFIX, Run
from gelujax.workdir import SUMMARY_FILE, read_json, write_json

# Noise levels the noise table shows.
NOISE_TABLE_LEVELS = (0.0, 1.0, 3.0)


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
  """

  settings: dict[str, Any]
  report: Report | None
  analysis: Analysis
  table: str
  files: list[str]
  findings: dict[str, list[str]]


def read_settings(task: str, selection: Sequence[Run], evaluation: Sequence[Run]) -> dict[str, Any]:
  """What the runs were trained with, read from their config.json and summary.json files."""
  first = selection[0]
  for run in selection[1:]:
    if run.learning_rates() != first.learning_rates() or run.seeds() != first.seeds():
      raise ValueError(
        f"{run.workdir} holds lrs {run.learning_rates()} x seeds {run.seeds()}, but "
        f"{first.workdir} holds lrs {first.learning_rates()} x seeds {first.seeds()}: the runs of "
        "one result must share their grid. Retrain one of them, or move it to another --out."
      )
  spec = first.config["spec"]
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
  }


def reported_lrs(row: dict[str, Any], plan: Design) -> list[float]:
  """The lrs of a selection grid that its result reports: the selected one, or every lr."""
  if not plan.select_lr:
    return [g["learning_rate"] for g in row["grid"]]
  return [row["selected"]["learning_rate"]] if row["selected"] else []


def summarize(run: Run, learning_rates: Sequence[float]) -> dict[str, Any]:
  """A run's row (:func:`gelujax.study.runs.summarize_run`) with its curve facts at the lrs
  its result reports."""
  return {**runs.summarize_run(run), "curves": curves.describe_curves(run, list(learning_rates))}


def curve_facts(rows: Sequence[dict[str, Any]]) -> list[tuple[str, float | None, str, Any]]:
  """Every curve fact of the rows, as :attr:`Analysis.curves` holds them."""
  facts = []
  for row in rows:
    described = row["curves"]
    for at in described["at"]:
      lr = at["learning_rate"]
      if at["not_learning"]:
        facts.append((row["run"], lr, "not_learning", at["not_learning"]))
      if at["improving"]:
        facts.append((row["run"], lr, "improving", at["improving"]))
      facts += [(row["run"], lr, "spike", spike) for spike in at["spikes"]]
  for row in rows:
    facts += [(row["run"], None, "jump", jump) for jump in row["curves"]["jumps"]]
  return facts


def load_evaluation(grid: Grid, row: dict[str, Any], plan: Design) -> Run | str:
  """A selection grid's evaluation run (``grid`` is the evaluation grid), or why it cannot be
  used (``"pending: ..."``)."""
  if not (grid.workdir / SUMMARY_FILE).exists():
    return analysis.PENDING_EVALUATION
  run = runs.load_run(grid.workdir)
  found = run.learning_rates()
  if len(found) != len(grid.learning_rates) or not all(
    runs.same_lr(a, b) for a, b in zip(found, grid.learning_rates, strict=False)
  ):
    which = "grid"
    if plan.select_lr:
      which = "selected lr" if grid.name == runs.evaluation_name(row["run"]) else "candidate lr"
    return (
      f"pending: {grid.workdir.name} holds lrs {found}, not the {which} "
      f"{list(grid.learning_rates)}: retrain it"
    )
  shared = sorted(set(run.seeds()) & set(row["grid"][0]["seeds"]))
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
  rows: list[dict[str, Any]]
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
    return Stages(selection, rows, no_runs, {row["run"]: [] for row in rows})
  by_run: dict[str, list[Grid]] = {}
  for g in evaluation_grids:
    by_run.setdefault(runs.evaluated_run(g.name), []).append(g)
  evaluated: dict[str, Evaluations] = {}
  for row in rows:
    found = by_run.get(row["run"])
    evaluated[row["run"]] = (
      [(g, load_evaluation(g, row, plan)) for g in found]
      if found
      else [(None, "pending: every selection member diverged")]
    )
  found = [s for r in Stages(selection, rows, plan, evaluated).evaluation_runs() for s in r.seeds()]
  seeds_found = tuple(dict.fromkeys(found)) or tuple(evaluation_seeds) or plan.evaluation_seeds
  return Stages(selection, rows, dataclasses.replace(plan, evaluation_seeds=seeds_found), evaluated)


def grid_values(row: dict[str, Any]) -> dict[float, dict[str, dict[int, float]]]:
  """lr -> metric key -> seed -> the value of each of a row's non-diverged members."""
  return {
    g["learning_rate"]: {
      k: dict(zip(s["seeds"], s["values"], strict=True)) for k, s in g["metrics"].items()
    }
    for g in row["grid"]
  }


def evaluation_values(
  found: Evaluations, values: dict[str, dict[float, dict[str, dict[int, float]]]]
) -> dict[float, dict[str, dict[int, float]] | str] | str:
  """A run's :attr:`gelujax.study.analysis.RunValues.evaluation`: lr -> the values of its
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
  :attr:`gelujax.study.analysis.RunValues.facts` holds it."""
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


def write_runs(task: str, stages: Stages, out: Path, root: Path) -> Result:
  """table.md, summary.json and the figure of a trained task, from its runs' files."""
  selection, rows, plan, evaluated = stages.selection, stages.rows, stages.plan, stages.evaluated
  evaluation_runs = stages.evaluation_runs()
  evaluation_rows = {run.name: summarize(run, run.learning_rates()) for run in evaluation_runs}
  evaluation_grid_values = {name: grid_values(row) for name, row in evaluation_rows.items()}
  settings = read_settings(task, selection, evaluation_runs)
  values = []
  for run, row in zip(selection, rows, strict=True):
    found = evaluated[row["run"]]
    values.append(
      RunValues(
        row["run"],
        row["activation"],
        row["dropout"],
        row["selected"] and row["selected"]["learning_rate"],
        grid_values(row),
        evaluation_values(found, evaluation_grid_values),
        run.seeds(),
        tuple(dict.fromkeys(s for _, r in found if isinstance(r, Run) for s in r.seeds())),
        run.learning_rates(),
        row["candidates"],
        curve_caveats(task, tested_runs(run, found, plan)),
      )
    )
  report = (PAPER[task].report if task in PAPER else None) or default_report(rows)
  metrics = analysis.table_metrics(rows, report)
  result = analysis.analyse(
    task,
    values,
    plan,
    selection_rows=rows,
    metrics=metrics,
    curves=curve_facts([*rows, *evaluation_rows.values()]),
    epochs=(settings["epochs"], tasks.get(task).epochs),
    command=readme.reproduce_command(settings, tasks.get(task), out=out, root=root),
  )
  table = write_table(task, rows, list(evaluation_rows.values()), report, result, metrics, out)
  if task == "mnist_ae":
    figure = plots.draw_autoencoder_figure(
      list(zip(selection, rows, strict=True)),
      out,
      f"seeds {analysis.describe_seeds(selection[0].seeds())}",
    )
  else:
    figure = plots.draw_loss_figure(
      task, loss_curves(selection, rows, evaluated, evaluation_rows), out
    )
  # The data's baselines (Twitter POS), computed where the runs' data are found, else read.
  records = [run.config.get("data") for run in [*selection, *evaluation_runs]]
  found = lookups.result_baselines(task, out, records, root)
  compared = []
  if isinstance(found, dict):
    compared = lookups.compare(found["lookup"], lookups.shown_runs(evaluation_rows, rows))
  embeddings = bool(settings["spec"]["data_options"].get("embeddings"))
  sections = findings.with_baselines(
    findings.write_findings(result),
    findings.baseline_lines(task, found, compared, embeddings=embeddings),
  )
  extra = {} if found is None else {"baselines": {"found": found, "compared": compared}}
  write_summary(out, task, settings, result, sections, report=report, rows=rows,
                evaluation_rows=evaluation_rows, evaluated=evaluated, **extra)  # fmt: skip
  files = [
    "table.md: the tables below",
    "summary.json: every verdict with its values, shift, interval, p and Holm p; every run's "
    "statistics (every lr of every selection grid and evaluation run: median, mean, std and the "
    "values of every seed); every exploratory comparison; the findings",
    f"{figure.name}: median over seeds with min–max bands",
  ]
  if isinstance(found, dict):
    files.append(
      f"{lookups.BASELINES_FILE}: the data's baselines without training (the out-of-vocabulary "
      "tokens and the most-frequent-tag lookup's errors, validation and test, cased and "
      "lowercased), with the sha256 of the data files they were computed from "
      "(`gelujax.study.baselines`; recomputed whenever the result is written where those files "
      "are found, read from here where they are not)"
    )
  files += [
    "runs/<run>/: the selection grids, runs/<run>_eval/: the evaluation runs"
    + (
      " at the selected lr, runs/<run>_eval_lr<lr>/: at another candidate lr"
      if plan.select_lr and plan.candidates
      else ""
    )
    + ", each a trainer workdir: config.json, metrics.jsonl, summary.json (and tensorboard/, "
    "checkpoints/, which git does not track under results/)",
  ]
  return Result(settings, report, result, table, files, sections)


def loss_curves(
  selection: Sequence[Run],
  rows: Sequence[dict[str, Any]],
  evaluated: dict[str, Evaluations],
  evaluation_rows: dict[str, dict[str, Any]],
) -> list[tuple[Run, dict[str, Any] | None, str]]:
  """Each run's curves as Fig. 2 draws them: its evaluation run at the selected lr where it is
  trained, else its selection grid at the selected lr."""
  shown = []
  for run, row in zip(selection, rows, strict=True):
    found = next((r for _, r in evaluated[row["run"]]), None)
    if isinstance(found, Run):
      shown.append((found, evaluation_rows[found.name]["grid"][0], "evaluation seeds"))
    else:
      shown.append((run, row["selected"], "selection seeds"))
  return shown


def default_report(rows: Sequence[dict[str, Any]]) -> Report:
  """For a task without paper numbers: test error where the task classifies, else test loss."""
  keys = {k for row in rows for g in row["grid"] for k in g["metrics"]}
  if "best.test_error" in keys:
    return Report("best.test_error", "test error (%)", 100.0)
  return Report("best.test_loss", "test loss")


def write_summary(
  out: Path,
  task: str,
  settings: dict[str, Any],
  result: Analysis,
  sections: dict[str, list[str]],
  **extra: Any,
) -> None:
  """summary.json: the settings, every verdict, the exploratory statistics and the findings."""
  extra = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in extra.items()}
  if "evaluated" in extra:
    extra["evaluated"] = {
      name: {
        (grid.name if grid else ""): found if isinstance(found, str) else found.name
        for grid, found in evaluations
      }
      for name, evaluations in extra["evaluated"].items()
    }
  write_json(
    out / "summary.json",
    {
      "task": task,
      "settings": settings,
      **extra,
      "verdicts": {
        "primary": [v.to_json() for v in result.primary],
        "secondary": [v.to_json() for v in result.secondary],
      },
      "earlier_design_verdicts": {
        "primary": [v.to_json() for v in result.earlier_primary],
        "secondary": [v.to_json() for v in result.earlier_secondary],
      },
      "candidates": [
        {**c, "lrs": [{"learning_rate": lr, "p": p, "candidate": ok} for lr, p, ok in c["lrs"]]}
        for c in result.candidates
      ],
      "untrained": {
        h.describe(): [{"run": r, "learning_rate": lr, "workdir": w} for r, lr, w in missing]
        for h, missing in result.untrained.items()
      },
      "sensitivity": [
        {
          "claim": s.hypothesis.describe(),
          "family": s.hypothesis.family,
          "selected_lrs": list(s.selected_lrs),
          "reference": s.reference and {"seeds": s.reference[1], **s.reference[0].to_json()},
          "at_lr": [
            {"learning_rate": lr, "comparison": c and c.to_json(), "agrees": s.agrees(lr)}
            for lr, c in s.at_lr.items()
          ],
        }
        for s in result.sensitivity
      ],
      "selections": [
        {**s, "comparison": s["comparison"] and s["comparison"].to_json()}
        for s in result.selections
      ],
      "exploratory": [
        {
          "scope": e.scope,
          "metric": e.metric.key,
          "run": e.run,
          "baseline": e.baseline,
          "seeds": e.seeds,
          "comparison": e.comparison.to_json(),
        }
        for e in result.exploratory
      ],
      "findings": sections,
    },
  )


def write_table(
  task: str,
  rows: Sequence[dict[str, Any]],
  evaluation_rows: Sequence[dict[str, Any]],
  report: Report,
  result: Analysis,
  metrics: Sequence[analysis.Metric],
  out: Path,
) -> str:
  """table.md: the evaluation runs and the selection grids beside the paper's numbers, the
  exploratory comparisons and instabilities, then every lr of the selection grids."""
  extra = [(m.key, m.label, m.scale) for m in metrics[1:]]
  select = rows[0]["select_metric"]
  # The grid of every lr marks each run's selected lr, not the lr the tables above show.
  grid_rows = rows
  where = f"the lr selected on {select}"
  if report.learning_rate is not None:
    # The paper reports these numbers per lr: show its lr, not a selected one.
    where = f"lr {report.learning_rate:g} (the paper's)"
    rows, evaluation_rows = (
      [
        {**row, "selected": runs.at_learning_rate(row, report.learning_rate) or row["selected"]}
        for row in group
      ]
      for group in (rows, evaluation_rows)
    )
  text = [f"# {task}: {report.label}, median over seeds at {where}\n"]
  if report.paper:
    text.append(
      f"Paper: {report.source}. The paper's GELU is `gelu_tanh`; it reports no numbers for the "
      "other activations.\n"
    )
  paper = {**report.paper, **{k + EVAL_SUFFIX: v for k, v in report.paper.items()}}
  table_options = {"metric": report.metric, "label": report.label, "scale": report.scale,
                   "paper": paper, "extra": extra}  # fmt: skip
  text.append("## Evaluation runs\n")
  if evaluation_rows:
    text.append(tables.format_table(evaluation_rows, **table_options))
  else:
    text.append("None trained yet.\n")
  selection_cells = {
    s["run"]: f"{s['selected']:g} over {s['runner_up']:g}: {findings.effect(s['comparison'])}"
    for s in result.selections
    if s["comparison"] is not None
  }
  text += [
    "## Selection grids\n",
    tables.format_table(rows, **table_options, selection=selection_cells or None),
    "Diverged members are left out of every statistic and counted in `diverged`; an lr whose "
    "members all diverged is never selected. std is the sample standard deviation over seeds. "
    "`lr selection`: the selected lr against the runner-up (the lr of the next lowest median), "
    "on each member's best selection metric: the Hodges–Lehmann shift with its exact interval "
    "and the uncorrected p. `unstable`: members of the lr shown whose training loss exceeds "
    f"{curves.JUMP_RATIO:g}x its running minimum.\n",
  ]
  text += exploratory_tables(result)
  text.append("## Every learning rate of the selection grids\n")
  text.append(
    tables.format_grid(
      grid_rows,
      metric=report.metric,
      label=report.label,
      scale=report.scale,
      mark_selected=result.design.select_lr,
    )
  )
  table = "\n".join(text)
  (out / "table.md").write_text(table)
  return table


def exploratory_tables(result: Analysis) -> list[str]:
  text = []
  if result.exploratory:
    text += [
      "## Exploratory comparisons\n",
      "Every activation that is not a baseline against ReLU and ELU: the Hodges–Lehmann shift "
      "of the run from the baseline with its exact interval, and the uncorrected two-sided "
      "p-value. Exploratory: no correction, no verdict.\n",
      tables.format_exploratory(result.exploratory),
    ]
  if any(kind == "jump" for _, _, kind, _ in result.curves):
    text += [
      "## Unstable members\n",
      f"Members whose training loss exceeds {curves.JUMP_RATIO:g}x its running minimum, at the "
      "peak of each jump.\n",
      tables.format_jumps(result),
    ]
  return text


# ---------------------------------------------------------------------------- the noise task


def find_noise_grids(out: Path, spec: Any, root: Path) -> list[Grid]:
  """The selection grids of the classifiers whose noise evaluations are under ``out/noise/``
  (their own, or their evaluation runs'), for re-rendering."""
  paths = sorted((out / "noise").glob("*.json")) if (out / "noise").is_dir() else []
  workdirs = {}
  for path in paths:
    workdir = root / read_json(path)["workdir"]
    # An evaluation run's classifiers stand for the selection grid beside them.
    workdir = workdir.parent / (runs.evaluated_run(workdir.name) or workdir.name)
    workdirs[workdir.name] = workdir
  if not workdirs:
    raise ValueError(
      f"--render: {out / 'noise'} holds no noise evaluations to render. Pass the --task, "
      "--dataset (or --out) of a noise reproduction that ran, or leave --render out."
    )
  found = []
  for workdir in workdirs.values():
    run = runs.load_run(workdir)
    found.append(
      (
        grids.activation_order(run.activation),
        Grid(run.name, spec, workdir, tuple(run.learning_rates())),
      )
    )
  return [grid for _, grid in sorted(found, key=lambda g: g[0])]


def noise_values(result: dict[str, Any]) -> dict[str, dict[int, float]]:
  """Metric key (``"accuracy@1"``) -> seed -> its value in a noise evaluation."""
  return {
    f"{key}@{a:g}": dict(zip(result["seeds"], noise.noise_values(result, key, a), strict=True))
    for key in ("accuracy", "loss")
    for a in analysis.NOISE_LEVELS_COMPARED
  }


def noise_lrs(rows: Sequence[dict[str, Any]]) -> list[float]:
  """Every lr some run selected: each run is evaluated under noise at all of them (the fixed-lr
  sensitivity needs them all)."""
  return list(dict.fromkeys(row["selected"]["learning_rate"] for row in rows if row["selected"]))


def evaluate_noise(stages: Stages, out: Path, *, root: Path, data_dir: str | None) -> None:
  """Evaluates under test-time noise, from the runs' checkpoints, every classifier of
  ``stages`` that :func:`write_noise` reads and ``out/noise/`` does not keep yet."""
  options = {"out": out, "root": root, "data_dir": data_dir, "evaluate": True}
  for run in stages.selection:
    for lr in noise_lrs(stages.rows):
      noise.cached_noise(run.workdir, lr, **options)
  for found in stages.evaluation_runs():
    noise.cached_noise(found.workdir, found.learning_rates()[0], **options)


def write_noise(task: str, stages: Stages, out: Path, *, root: Path) -> Result:
  """Fig. 3: the classifier task's no-dropout runs (the selection grids and their evaluation
  runs) under test-time noise, from the evaluations kept in ``out/noise/``."""
  selection, rows, plan = stages.selection, stages.rows, stages.plan
  options = {"out": out, "root": root, "data_dir": None, "evaluate": False}
  lrs = noise_lrs(rows)
  values, shown, evaluation_runs, evaluation_rows = [], {}, [], {}
  for run, row in zip(selection, rows, strict=True):
    kept = {lr: noise.cached_noise(run.workdir, lr, **options) for lr in lrs}
    kept = {lr: result for lr, result in kept.items() if result is not None}
    found = stages.evaluated[row["run"]]
    evaluation: dict[float, Any] | str = {}
    if len(found) == 1 and found[0][0] is None:
      evaluation = found[0][1]
    tested: list[tuple[float, list[Run]]] = []
    for grid, classifiers in found if isinstance(evaluation, dict) else []:
      if isinstance(classifiers, str):
        evaluation.update({lr: classifiers for lr in grid.learning_rates})
        continue
      evaluation_runs.append(classifiers)
      evaluation_rows[classifiers.name] = summarize(classifiers, classifiers.learning_rates())
      lr = classifiers.learning_rates()[0]
      tested.append((lr, [classifiers]))
      result = noise.cached_noise(classifiers.workdir, lr, **options)
      if result is None:
        evaluation[lr] = "pending: noise evaluation of the evaluation seeds not run"
      else:
        evaluation[lr] = noise_values(result)
        shown[classifiers.name] = result
    selected = row["selected"] and row["selected"]["learning_rate"]
    if runs.evaluation_name(row["run"]) not in shown and selected in kept:
      shown[row["run"]] = kept[selected]
    values.append(
      RunValues(
        row["run"], row["activation"], row["dropout"], selected,
        {lr: noise_values(result) for lr, result in kept.items()}, evaluation, run.seeds(),
        tuple(dict.fromkeys(s for _, r in found if isinstance(r, Run) for s in r.seeds())),
        lrs, row["candidates"], curve_caveats(task + NOISE_SUFFIX, tested),
      )
    )  # fmt: skip
  settings = read_settings(task + NOISE_SUFFIX, selection, evaluation_runs)
  result = analysis.analyse(
    task + NOISE_SUFFIX,
    values,
    plan,
    selection_rows=rows,
    metrics=analysis.noise_metrics(),
    curves=curve_facts([*rows, *evaluation_rows.values()]),
    epochs=(settings["epochs"], tasks.get(task).epochs),
    command=readme.reproduce_command(settings, tasks.get(task), out=out, root=root),
  )
  table = write_noise_table(task + NOISE_SUFFIX, shown, result, out)
  labels = {
    f"{name} (lr {r['learning_rate']:g}, seeds {analysis.describe_seeds(r['seeds'])}"
    + (f", {r['diverged']}/{r['members']} diverged)" if r["diverged"] else ")"): r
    for name, r in shown.items()
  }
  figure = plots.draw_noise_figure(task + NOISE_SUFFIX, settings["dataset"], labels, out)
  sections = findings.write_findings(result)
  write_summary(out, task + NOISE_SUFFIX, settings, result, sections, classifier_rows=rows,
                evaluation_rows=evaluation_rows, runs=shown)  # fmt: skip
  workdirs = sorted({grids.repo_relative(run.workdir.parent, root) for run in selection})
  files = [
    "table.md: the tables below",
    "summary.json: every verdict with its values, shift, interval, p and Holm p; accuracy and "
    "log loss per seed and noise level of every classifier shown; the classifiers' statistics; "
    "every exploratory comparison; the findings",
    f"{figure.name}: median over seeds with min–max bands",
    "noise/<workdir>_lr<lr>.json: each noise evaluation (the classifiers of one workdir at one lr)",
    f"classifier workdirs: {', '.join(workdirs)} (`<run>/`: selection grids, `<run>_eval/`: "
    "evaluation runs)",
  ]
  return Result(settings, None, result, table, files, sections)


def write_noise_table(
  task: str, shown: dict[str, dict[str, Any]], result: Analysis, out: Path
) -> str:
  text = [
    f"# {task}: test accuracy and log loss under Unif[-a, a] pixel noise\n",
    "Each run's classifiers at one lr: its evaluation run (`<run>_eval`) where trained and "
    "evaluated, else its selection grid at the selected lr. Restored after their last epoch "
    "and evaluated on the test set. Every number is the median over seeds of each seed's value, "
    "linearly interpolated where a lies between two evaluated levels (a = 1 does). Paper: "
    "GELU's accuracy read off Fig. 3 (approximate); its GELU is `gelu_tanh`.\n",
    tables.format_noise_table(shown, at=NOISE_TABLE_LEVELS, paper=PAPER_NOISE_ACCURACY),
    *exploratory_tables(result),
  ]
  table = "\n".join(text)
  (out / "table.md").write_text(table)
  return table


# ----------------------------------------------------------------------------- the commands


def reproduce(
  task: str,
  spec: Any,
  *,
  out: Path,
  root: Path,
  activations: Sequence[str],
  dropout_rates: Sequence[float],
  learning_rates: Sequence[float],
  seeds: Sequence[int],
  evaluation_seeds: Sequence[int] | None = None,
  data_dir: str | None = None,
) -> Path:
  """The whole reproduction of ``task``: trains what is missing, then writes the result.

  Args:
    task: one of ``gelujax.paper.PAPER_TASKS`` (or any registered task, or ``<task>_noise``).
    spec: the task's spec with the reproduction's settings (dataset, epochs, data options);
      the activation and dropout of each run replace its own.
    out: the output directory.
    root: the repository: paths inside it are written relative to it, and a result written
      under ``root/results/`` updates the overview in ``root/README.md``.
    activations, dropout_rates, learning_rates: one run per activation and dropout rate, each a
      grid of the learning rates.
    seeds: the selection seeds of every grid.
    evaluation_seeds: the seeds of the evaluation runs (None: the task's design's); none of
      them may be a selection seed where the lr is selected.
    data_dir: where the dataset's files are.

  Returns:
    The output directory.
  """
  noise_task = task.endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  plan = design(base, len(seeds))
  evaluation = list(plan.evaluation_seeds if evaluation_seeds is None else evaluation_seeds)
  overlap = sorted(set(evaluation) & set(seeds))
  if plan.select_lr and overlap:
    raise ValueError(
      f"--evaluation_seeds {','.join(map(str, evaluation))} shares {overlap} with --seeds: the "
      "evaluation seeds must be fresh, none of them a seed the lr was selected on."
    )
  selection_grids = grids.make_grids(spec, activations, dropout_rates, learning_rates, out)
  out.mkdir(parents=True, exist_ok=True)
  if noise_task:  # The classifier task's finished runs, beside out, are reused.
    shared = out.parent / base / "runs"
    selection_grids = [
      grids.find_classifier_workdir(g, shared / g.name, seeds) for g in selection_grids
    ]
  stages = run_stages(
    base,
    selection_grids,
    out,
    seeds=seeds,
    evaluation_seeds=evaluation,
    data_dir=data_dir,
    train=True,
  )
  if noise_task:
    evaluate_noise(stages, out, root=root, data_dir=data_dir)
  # The result is every run under out, not only this invocation's (--activations may be a
  # subset of what an earlier one trained): the same files a --render reads.
  return write(task, find_stages(task, out, root), out=out, root=root, trained=True)


def render(task: str, *, out: Path, root: Path) -> Path:
  """Rebuilds a result's tables, figures, findings, summary.json and README from the files
  under ``out``, training and evaluating nothing (every setting is read from the runs' files).

  Raises:
    ValueError: ``out`` holds no runs (or, for a noise task, no noise evaluations) to render.
  """
  return write(task, find_stages(task, out, root), out=out, root=root, trained=False)


def find_stages(task: str, out: Path, root: Path) -> Stages:
  """The stages of every finished run under ``out`` (for a noise task: every classifier with
  noise evaluations in ``out/noise/``), read from their files; nothing is trained."""
  base = task.removesuffix(NOISE_SUFFIX)
  spec = tasks.get(base)
  noise_task = task.endswith(NOISE_SUFFIX)
  found = find_noise_grids(out, spec, root) if noise_task else grids.find_grids(out, spec)
  options = {"seeds": [], "evaluation_seeds": [], "data_dir": None, "train": False}
  return run_stages(base, found, out, **options)


def write(task: str, stages: Stages, *, out: Path, root: Path, trained: bool) -> Path:
  """Writes the result of ``stages`` under ``out`` from the runs' files (and, for a noise task,
  the evaluations kept in ``out/noise/``), then its README; returns ``out``. ``trained`` says
  whether this invocation trained (the README says which)."""
  base = task.removesuffix(NOISE_SUFFIX)
  if task.endswith(NOISE_SUFFIX):
    result = write_noise(base, stages, out, root=root)
  else:
    result = write_runs(base, stages, out, root)
  write_result(task, result, out=out, root=root, trained=trained)
  return out


def write_result(task: str, result: Result, *, out: Path, root: Path, trained: bool) -> None:
  """The result's README, and the top-level README's overview when it lies under results/."""
  noise_task = task.endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  paper = tasks.get(base)
  settings = result.settings
  readme.write_readme(
    out,
    title=f"GELU paper reproduction: {task} on {settings['dataset']}",
    opening=readme.hypotheses_part(task, result.analysis),
    command=readme.reproduce_command(settings, paper, out=out, root=root),
    settings=readme.describe_settings(settings, result.report),
    trained=trained,
    deviations=readme.list_deviations(
      base,
      paper,
      settings["spec"],
      seeds=settings["seeds"],
      learning_rates=settings["learning_rates"],
      activations=settings["activations"],
      dropout_rates=settings["dropout_rates"],
      noise=noise_task,
    ),
    files=result.files,
    sections=result.findings,
    table=result.table,
  )
  if out.resolve().is_relative_to((root / "results").resolve()):
    readme.write_results_overview(root)
