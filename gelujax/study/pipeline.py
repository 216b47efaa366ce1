"""One of the paper's experiments end to end: selection grids -> selected lrs -> evaluation
seeds -> verdicts, tables, figures, README.

Each run's selection grid is trained into ``<out>/runs/<run>/`` (:mod:`gelujax.study.grids`);
each run's lr is selected on those seeds; its evaluation run, fresh seeds at that lr, is
trained into ``<out>/runs/<run>_eval/``, and the same seeds at each other candidate lr
(``gelujax.paper.DESIGN_CHANGES``) into ``<out>/runs/<run>_eval_lr<lr>/``; then, from the
workdir files alone, ``<out>`` receives ``table.md``, ``summary.json``, the figure PNG(s),
``values.csv`` and ``verdicts.tex`` (`gelujax.study.exports`) and a ``README.md`` that opens with
the task's hypotheses and their verdicts, its tables and findings.
:func:`render` trains nothing and rebuilds a result from the files already there; a hypothesis
whose evaluation run is absent or unfinished is *pending*.

A task named ``<classifier>_noise`` (``mnist_noise``) trains nothing new when the classifier
task's no-dropout runs exist beside ``<out>`` (``<out>/../mnist/runs/``): it restores the
evaluation classifiers (and the selection classifiers, at each lr some run selected, where
their checkpoints are kept) and evaluates them on noisy test images.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax import tasks
from gelujax.paper import (
  NOISE_SUFFIX,
  PAPER,
  REFERENCES,
  design,
)
from gelujax.study import analysis, exports, findings, grids, numbers, overview, plots, readme
from gelujax.study import baselines as lookups
from gelujax.study.evidence import RunValues
from gelujax.study.noise_task import evaluate_noise, find_noise_grids, write_noise
from gelujax.study.runs import Run
from gelujax.study.stages import (
  Result,
  Stages,
  curve_caveats,
  curve_facts,
  evaluation_values,
  grid_values,
  read_settings,
  run_stages,
  summarize,
  tested_runs,
)
from gelujax.study.summary import default_report, loss_curves, write_summary, write_table


def write_runs(
  task: str,
  stages: Stages,
  out: Path,
  root: Path,
  project: bool = True,
  references: Sequence[str] = REFERENCES,
) -> Result:
  """table.md, summary.json and the figure of a trained task, from its runs' files;
  ``references`` as :func:`reproduce` takes them."""
  selection, rows, plan, evaluated = stages.selection, stages.rows, stages.plan, stages.evaluated
  evaluation_runs = stages.evaluation_runs()
  evaluation_rows = {run.name: summarize(run, run.learning_rates()) for run in evaluation_runs}
  evaluation_grid_values = {name: grid_values(row) for name, row in evaluation_rows.items()}
  settings = read_settings(task, selection, evaluation_runs, references)
  values = []
  for run, row in zip(selection, rows, strict=True):
    found = evaluated[row.run]
    values.append(
      RunValues(
        row.run,
        row.activation,
        row.dropout,
        row.selected and row.selected.learning_rate,
        grid_values(row),
        evaluation_values(found, evaluation_grid_values),
        run.seeds(),
        tuple(dict.fromkeys(s for _, r in found if isinstance(r, Run) for s in r.seeds())),
        run.learning_rates(),
        row.candidates,
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
    command=readme.reproduce_command(
      settings, tasks.get(task), out=out, root=root, project=project
    ),
    references=references,
  )
  table = write_table(
    task, rows, list(evaluation_rows.values()), report, result, metrics, out,
    own=list(settings.get("activation_sources", {})),
  )  # fmt: skip
  if task == "mnist_ae":
    figure = plots.draw_autoencoder_figure(
      list(zip(selection, rows, strict=True)),
      out,
      f"seeds {numbers.seeds(selection[0].seeds())}",
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
  sections = findings.with_baselines(
    findings.write_findings(result),
    findings.baseline_lines(task, found, compared, spec=settings["spec"]),
  )
  extra = {} if found is None else {"baselines": {"found": found, "compared": compared}}
  write_summary(out, task, settings, result, sections, report=report, rows=rows,
                evaluation_rows=evaluation_rows, evaluated=evaluated, **extra)  # fmt: skip
  once = settings["epochs"] == 1 and settings["spec"].get("evals_per_epoch", 1) == 1
  files = [
    "table.md: the tables below",
    "summary.json: every verdict with its values, shift, interval, p and Holm p; every run's "
    "statistics (every lr of every selection grid and evaluation run: median, mean, std and the "
    "values of every seed); every exploratory comparison; the findings",
    f"{figure.name}: median over seeds with min–max "
    + ("bars, a marker per run and split (each member evaluated once)" if once else "bands"),
    f"{exports.VALUES_FILE}: every value the statistics are computed on, a row per run folder, "
    "member (lr and seed) and metric: each member's best-epoch and final metrics as its records "
    "give them, unscaled (an error as a fraction); a diverged member's empty, marked in "
    "`diverged` (`gelujax.study.exports`)",
    exports.verdicts_line(result),
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
  values_rows = []
  for run, row in zip(selection, rows, strict=True):
    values_rows += exports.run_values(run, exports.SELECTION, out)
    for _, found_run in evaluated[row.run]:
      if isinstance(found_run, Run):
        values_rows += exports.run_values(found_run, exports.EVALUATION, out)
  return Result(settings, report, result, table, files, sections, values_rows)


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
  project: bool = True,
  references: Sequence[str] = REFERENCES,
) -> Path:
  """The whole reproduction of ``task``: trains what is missing, then writes the result.

  Args:
    task: one of ``gelujax.paper.PAPER_TASKS`` (or any registered task, or ``<task>_noise``).
    spec: the task's spec with the reproduction's settings (dataset, epochs, data options);
      the activation and dropout of each run replace its own.
    out: the output directory.
    root: the folder the result's commands run from (the repository's root for the project's
      own): paths inside it are written relative to it.
    project: whether ``root`` is the project's own checkout : a result
      written under ``root/results/`` updates the overview in ``root/README.md``, and its
      README names the design card's script; False for a user's folder, whose README names the
      installed command (`gelujax.study.readme.command_name`) and which has no overview.
    activations, dropout_rates, learning_rates: one run per activation and dropout rate, each a
      grid of the learning rates.
    seeds: the selection seeds of every grid.
    evaluation_seeds: the seeds of the evaluation runs (None: the task's design's); none of
      them may be a selection seed where the lr is selected.
    data_dir: where the dataset's files are.
    references: the activations every other one is compared with besides the baselines, where
      they are trained beside it (exploratory; `gelujax.study.analysis.exploratory`).

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
      f"`evaluation_seeds` {','.join(map(str, evaluation))} shares {overlap} with `seeds`: the "
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
  # The result is every run under out, not only this invocation's (`activations` may be a
  # subset of what an earlier one trained): the same files `render` reads.
  stages = find_stages(task, out, root)
  return write(
    task, stages, out=out, root=root, trained=True, project=project, references=references
  )


def render(
  task: str,
  *,
  out: Path,
  root: Path,
  project: bool = True,
  references: Sequence[str] = REFERENCES,
) -> Path:
  """Rebuilds a result's tables, figures, findings, summary.json and README from the files
  under ``out``, training and evaluating nothing (every setting is read from the runs' files);
  ``root``, ``project`` and ``references`` as :func:`reproduce` takes them.

  Raises:
    ValueError: ``out`` holds no runs (or, for a noise task, no noise evaluations) to render.
  """
  stages = find_stages(task, out, root)
  return write(
    task, stages, out=out, root=root, trained=False, project=project, references=references
  )


def find_stages(task: str, out: Path, root: Path) -> Stages:
  """The stages of every finished run under ``out`` (for a noise task: every classifier with
  noise evaluations in ``out/noise/``), read from their files; nothing is trained."""
  base = task.removesuffix(NOISE_SUFFIX)
  spec = tasks.get(base)
  noise_task = task.endswith(NOISE_SUFFIX)
  found = find_noise_grids(out, spec, root) if noise_task else grids.find_grids(out, spec)
  options = {"seeds": [], "evaluation_seeds": [], "data_dir": None, "train": False}
  return run_stages(base, found, out, **options)


def write(
  task: str,
  stages: Stages,
  *,
  out: Path,
  root: Path,
  trained: bool,
  project: bool = True,
  references: Sequence[str] = REFERENCES,
) -> Path:
  """Writes the result of ``stages`` under ``out`` from the runs' files (and, for a noise task,
  the evaluations kept in ``out/noise/``), then its README; returns ``out``. ``trained`` says
  whether this invocation trained (the README says which)."""
  base = task.removesuffix(NOISE_SUFFIX)
  if task.endswith(NOISE_SUFFIX):
    result = write_noise(base, stages, out, root=root, project=project, references=references)
  else:
    result = write_runs(base, stages, out, root, project, references)
  write_result(task, result, out=out, root=root, trained=trained, project=project)
  return out


def write_result(
  task: str, result: Result, *, out: Path, root: Path, trained: bool, project: bool = True
) -> None:
  """The result's values.csv and verdicts.tex (`gelujax.study.exports`), then its README, which
  ends on what fills the folder (`gelujax.study.readme.describe_disk`), and the top-level
  README's overview when it lies under the project's own results/ (`reproduce`'s ``project``):
  never a user's folder's."""
  noise_task = task.endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  paper = tasks.get(base)
  settings = result.settings
  title = f"GELU paper reproduction: {task} on {settings['dataset']}"
  exports.write_values(out, result.values)
  exports.write_verdicts(out, result.analysis, title)
  readme.write_readme(
    out,
    title=title,
    opening=readme.hypotheses_part(task, result.analysis),
    method=readme.method_part(task, result.analysis),
    command=readme.reproduce_command(settings, paper, out=out, root=root, project=project),
    run_from=readme.where_to_run(root, project),
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
    files=[*result.files, readme.describe_disk(out)],
    sections=result.findings,
    table=result.table,
  )
  if project and out.resolve().is_relative_to((root / "results").resolve()):
    overview.write_results_overview(root)
