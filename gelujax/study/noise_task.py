"""Fig. 3's result, ``<classifier>_noise`` (``mnist_noise``): the classifier task's no-dropout
runs (the selection grids and their evaluation runs) under test-time noise, evaluated from their
checkpoints (:func:`evaluate_noise`) and judged from the evaluations kept in ``<out>/noise/``
(:func:`write_noise`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax import tasks
from gelujax.paper import (
  NOISE_SUFFIX,
  PAPER_NOISE_ACCURACY,
  REFERENCES,
)
from gelujax.study import (
  analysis,
  exports,
  findings,
  grids,
  noise,
  numbers,
  plots,
  readme,
  runs,
  tables,
)
from gelujax.study.analysis import Analysis
from gelujax.study.evidence import RunValues
from gelujax.study.grids import Grid
from gelujax.study.runs import Run, RunRow
from gelujax.study.stages import (
  Result,
  Stages,
  curve_caveats,
  curve_facts,
  read_settings,
  summarize,
)
from gelujax.study.summary import exploratory_tables, write_summary
from gelujax.workdir import read_json

# Noise levels the noise table shows.
NOISE_TABLE_LEVELS = (0.0, 1.0, 3.0)


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
      f"`render`: {out / 'noise'} holds no noise evaluations to render. Pass the `task`, "
      "`dataset` (or `out`) of a noise reproduction that ran, or leave `render` out."
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


def noise_lrs(rows: Sequence[RunRow]) -> list[float]:
  """Every lr some run selected: each run is evaluated under noise at all of them (the fixed-lr
  sensitivity needs them all)."""
  return list(dict.fromkeys(row.selected.learning_rate for row in rows if row.selected))


def evaluate_noise(stages: Stages, out: Path, *, root: Path, data_dir: str | None) -> None:
  """Evaluates under test-time noise, from the runs' checkpoints, every classifier of
  ``stages`` that :func:`write_noise` reads and ``out/noise/`` does not keep yet."""
  options = {"out": out, "root": root, "data_dir": data_dir, "evaluate": True}
  for run in stages.selection:
    for lr in noise_lrs(stages.rows):
      noise.cached_noise(run.workdir, lr, **options)
  for found in stages.evaluation_runs():
    noise.cached_noise(found.workdir, found.learning_rates()[0], **options)


def write_noise(
  task: str,
  stages: Stages,
  out: Path,
  *,
  root: Path,
  project: bool = True,
  references: Sequence[str] = REFERENCES,
) -> Result:
  """Fig. 3: the classifier task's no-dropout runs (the selection grids and their evaluation
  runs) under test-time noise, from the evaluations kept in ``out/noise/``; ``references`` as
  `gelujax.study.pipeline.reproduce` takes them."""
  selection, rows, plan = stages.selection, stages.rows, stages.plan
  options = {"out": out, "root": root, "data_dir": None, "evaluate": False}
  lrs = noise_lrs(rows)
  values, shown, evaluation_runs, evaluation_rows = [], {}, [], {}
  values_rows: list[dict[str, str]] = []  # values.csv's
  for run, row in zip(selection, rows, strict=True):
    kept = {lr: noise.cached_noise(run.workdir, lr, **options) for lr in lrs}
    kept = {lr: result for lr, result in kept.items() if result is not None}
    for lr, result in kept.items():
      values_rows += exports.noise_values(run, exports.SELECTION, out, lr, noise_values(result))
    found = stages.evaluated[row.run]
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
        values_rows += exports.noise_values(
          classifiers, exports.EVALUATION, out, lr, evaluation[lr]
        )
    selected = row.selected and row.selected.learning_rate
    if runs.evaluation_name(row.run) not in shown and selected in kept:
      shown[row.run] = kept[selected]
    values.append(
      RunValues(
        row.run, row.activation, row.dropout, selected,
        {lr: noise_values(result) for lr, result in kept.items()}, evaluation, run.seeds(),
        tuple(dict.fromkeys(s for _, r in found if isinstance(r, Run) for s in r.seeds())),
        lrs, row.candidates, curve_caveats(task + NOISE_SUFFIX, tested),
      )
    )  # fmt: skip
  settings = read_settings(task + NOISE_SUFFIX, selection, evaluation_runs, references)
  result = analysis.analyse(
    task + NOISE_SUFFIX,
    values,
    plan,
    selection_rows=rows,
    metrics=analysis.noise_metrics(),
    curves=curve_facts([*rows, *evaluation_rows.values()]),
    epochs=(settings["epochs"], tasks.get(task).epochs),
    command=readme.reproduce_command(
      settings, tasks.get(task), out=out, root=root, project=project
    ),
    references=references,
  )
  table = write_noise_table(
    task + NOISE_SUFFIX, shown, result, out, own=list(settings.get("activation_sources", {}))
  )
  labels = {
    f"{name} (lr {r['learning_rate']:g}, seeds {numbers.seeds(r['seeds'])}"
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
    f"{exports.VALUES_FILE}: every value the statistics are computed on, a row per classifier "
    "workdir (relative to this folder), member (lr and seed) and metric: its test accuracy and "
    "log loss at the noise levels compared (`accuracy@1`: at a = 1, linearly interpolated "
    "between the levels evaluated); a diverged member, not evaluated, empty, marked in "
    "`diverged` (`gelujax.study.exports`)",
    exports.verdicts_line(result),
    "noise/<workdir>_lr<lr>.json: each noise evaluation (the classifiers of one workdir at one lr)",
    f"classifier workdirs: {', '.join(workdirs)} (`<run>/`: selection grids, `<run>_eval/`: "
    "evaluation runs)",
  ]
  return Result(settings, None, result, table, files, sections, values_rows)


def write_noise_table(
  task: str,
  shown: dict[str, dict[str, Any]],
  result: Analysis,
  out: Path,
  own: Sequence[str] = (),
) -> str:
  text = [
    f"# {task}: test accuracy and log loss under Unif[-a, a] pixel noise\n",
    "Each run's classifiers at one lr: its evaluation run (`<run>_eval`) where trained and "
    "evaluated, else its selection grid at the selected lr. Restored after their last epoch "
    "and evaluated on the test set. Every number is the median over seeds of each seed's value, "
    "linearly interpolated where a lies between two evaluated levels (a = 1 does). Paper: "
    "GELU's accuracy read off Fig. 3 (approximate); its GELU is `gelu_tanh`.\n",
    tables.format_noise_table(shown, at=NOISE_TABLE_LEVELS, paper=PAPER_NOISE_ACCURACY),
    *exploratory_tables(result, own),
  ]
  table = "\n".join(text)
  (out / "table.md").write_text(table)
  return table


# ----------------------------------------------------------------------------- the commands
