"""One of the paper's experiments end to end: grids -> selection -> tables, figures, README.

Each activation (and, for MNIST, each dropout rate) is one run: its learning-rate x seed grid is
trained as members by `gelujax.trainer.fit` into ``<out>/runs/<run>/``. Finished runs (their
summary.json) are skipped and partial ones resume from their checkpoints, so a killed
reproduction restarts where it stopped. Then, from the workdir files alone, ``<out>`` receives
``table.md``, ``summary.json``, the figure PNG(s) and a ``README.md`` recording the command, the
machine, the wall time and every deviation from the paper's protocol.

A task named ``<classifier>_noise`` (``mnist_noise``) trains nothing new when the classifier
task's no-dropout runs exist beside ``<out>`` (``<out>/../mnist/runs/``): it restores every
member at each run's selected learning rate and evaluates it on noisy test images.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax import cli, plots, sweep, writers
from gelujax.paper import (
  NOISE_LEVELS,
  NOISE_SUFFIX,
  PAPER_ACTIVATIONS,
  PAPER_DROPOUT_RATES,
  PAPER_NOISE_ACCURACY,
  PAPER_TASKS,
  REPORTS,
  RETRAIN_TASKS,
  Report,
)

RETRAIN_SUFFIX = "_train_on_all"
TIMINGS_FILE = "timings.json"
DEFAULT_ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "elu", "silu")

RANKING_INTRO = (
  "## Ranking and seed-to-seed spread\n\n"
  "Per metric of the table, the runs by median, best first (losses and errors: lowest; "
  "accuracies: highest). Each run is compared with the run ranked just above it and with the "
  "first by the exact two-sided Wilcoxon–Mann–Whitney rank-sum test over seeds: p < 0.05 counts "
  "as a difference beyond the seed-to-seed spread. With n seeds a side the smallest possible p "
  "is 2 / C(2n, n): 0.0079 for 5 seeds, 0.1 for 3, so with 3 seeds no difference can reach it.\n"
)


@dataclasses.dataclass(frozen=True)
class Grid:
  """One run of the reproduction: its name, spec, workdir and learning rates."""

  name: str
  spec: Any
  workdir: Path
  learning_rates: tuple[float, ...]


def grid_name(activation: str, dropout: float, spec: Any) -> str:
  """The run's name: the activation, suffixed with the dropout rate where it is not the task's."""
  return sweep.run_name(activation, None if dropout == spec.dropout else dropout)


def make_grids(
  spec: Any,
  activations: Sequence[str],
  dropout_rates: Sequence[float],
  learning_rates: Sequence[float],
  out: Path,
) -> list[Grid]:
  """Every run of the reproduction, dropout-rate major."""
  grids = []
  for rate in dropout_rates:
    for activation in activations:
      name = grid_name(activation, rate, spec)
      run_spec = cli.replace_spec(
        spec, {"activation": ("activations", activation), "dropout": ("dropout_rates", rate)}
      )
      grids.append(Grid(name, run_spec, out / "runs" / name, tuple(learning_rates)))
  return grids


def train_grids(
  grids: Sequence[Grid], *, seeds: Sequence[int], data_dir: str | None, out: Path
) -> None:
  """Trains (or skips, or resumes) every grid, one progress line each; records training time."""
  timings = read_timings(out)
  machine = describe_machine()
  for i, grid in enumerate(grids, 1):
    start = time.time()
    lrs = ", ".join(f"{lr:g}" for lr in grid.learning_rates)
    print(
      f"[{i}/{len(grids)}] {grid.name}: lrs {lrs} x {len(seeds)} seeds, {grid.spec.epochs} "
      "epochs ...",
      flush=True,
    )
    trained = False
    try:
      _, trained = sweep.run_grid(
        grid.spec, grid.workdir, seeds=seeds, learning_rates=grid.learning_rates, data_dir=data_dir
      )
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM: keep the time trained so far.
      trained = True
      raise
    finally:
      elapsed = time.time() - start
      if trained:
        timing = timings.setdefault(grid.name, {"seconds": 0.0, "machines": []})
        timing["seconds"] += elapsed
        if machine not in timing["machines"]:
          timing["machines"].append(machine)
        writers.write_json(out / TIMINGS_FILE, timings)
    done = f"trained in {elapsed:.1f} s" if trained else "finished earlier: skipped"
    print(f"[{i}/{len(grids)}] {grid.name}: {done} ({grid.workdir})", flush=True)


def read_timings(out: Path) -> dict[str, dict[str, Any]]:
  """``out/timings.json``: run -> its training time summed over the invocations that trained it
  (``seconds``) and the machines they ran on (``machines``, in order). A file written before
  machines were recorded holds bare seconds; their machines read as unknown ([])."""
  path = out / TIMINGS_FILE
  timings = writers.read_json(path) if path.exists() else {}
  return {
    name: t if isinstance(t, dict) else {"seconds": t, "machines": []}
    for name, t in timings.items()
  }


def describe_training(timings: dict[str, dict[str, Any]]) -> list[str]:
  """The README's list items on the training time and machines of every run."""
  if not timings:
    return ["- Training time: none (this invocation trained nothing and none earlier is recorded)."]
  seconds = ", ".join(f"{name} {t['seconds']:.0f} s" for name, t in timings.items())
  by_machines: dict[str, list[str]] = {}
  for name, t in timings.items():
    key = " | then | ".join(t["machines"]) or "not recorded (trained before machines were recorded)"
    by_machines.setdefault(key, []).append(name)
  return [
    f"- Training time per run (summed over the invocations that trained it): {seconds}.",
    "- Trained on:",
    *[f"  - {', '.join(names)}: {key}" for key, names in by_machines.items()],
  ]


def repo_relative(path: Path, root: Path) -> str:
  """``path`` relative to the repository ``root`` when inside it (results are committed), else
  absolute."""
  path, root = path.resolve(), root.resolve()
  return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def default_report(rows: Sequence[dict[str, Any]]) -> Report:
  """For a task without paper numbers: test error where the task classifies, else test loss."""
  keys = {k for row in rows for g in row["grid"] for k in g["metrics"]}
  if "best.test_error" in keys:
    return Report("best.test_error", "test error (%)", 100.0)
  return Report("best.test_loss", "test loss")


def series_label(name: str, stats: dict[str, Any]) -> str:
  """A legend label: the run, its lr and its diverged members."""
  label = f"{name} (lr {stats['learning_rate']:g}"
  if stats["diverged"]:
    label += f", {stats['diverged']}/{stats['members']} diverged"
  return label + ")"


def loss_keys(run: sweep.Run) -> tuple[str, str]:
  """Training loss and the evaluation loss of the split the run selects on."""
  return "train_loss", sweep.selection_metric(run).split("_", 1)[0] + "_loss"


def draw_loss_figure(
  task: str, runs: Sequence[sweep.Run], rows: Sequence[dict[str, Any]], out: Path
) -> Path:
  """Fig. 2 style: a panel per dropout rate, each run at its selected lr."""
  panels: dict[str, dict[str, Any]] = {}
  for run, row in zip(runs, rows, strict=True):
    series = panels.setdefault(f"dropout rate {run.dropout:g}", {})
    selected = row["selected"]
    if selected is None:
      series[f"{run.activation} (all diverged)"] = {"train": None}
    else:
      label = series_label(run.activation, selected)
      series[label] = plots.run_curves(run, selected["learning_rate"], loss_keys(run))
  fig = plots.plot_curves(
    panels,
    ylabel="log loss (nats)",
    title=f"{task} on {runs[0].config['dataset']}: training (dark) and held-out (light) loss",
  )
  return plots.save_figure(fig, out / "loss_curves.png")


def draw_autoencoder_figure(runs: Sequence[sweep.Run], rows: Sequence[dict[str, Any]], out: Path):
  """Fig. 4: a panel per learning rate, train and test MSE of every run at that lr."""
  panels: dict[str, dict[str, Any]] = {}
  for run, row in zip(runs, rows, strict=True):
    for stats in row["grid"]:
      lr = stats["learning_rate"]
      label = series_label(run.activation, stats)
      panels.setdefault(f"learning rate {lr:g}", {})[label] = plots.run_curves(
        run, lr, ("train_loss", "test_loss")
      )
  fig = plots.plot_curves(
    panels,
    ylabel="reconstruction MSE",
    title=f"autoencoder on {runs[0].config['dataset']}: train (dark) and test (light)",
  )
  return plots.save_figure(fig, out / "reconstruction_curves.png")


def at_learning_rate(row: dict[str, Any], learning_rate: float) -> dict[str, Any] | None:
  """The row's grid entry for ``learning_rate`` (None when the grid lacks it)."""
  return next((g for g in row["grid"] if math.isclose(g["learning_rate"], learning_rate)), None)


def describe_selection(task: str) -> str:
  """How the table picks each run's lr, for the README."""
  selection = (
    "one selected per run: lowest median over seeds of the best validation metric, or of the "
    "test metric where the task has no validation split"
  )
  report = REPORTS.get(task)
  if report is not None and report.learning_rate is not None:
    return f"the table compares at the paper's lr {report.learning_rate:g}; {selection}"
  return selection


def write_table(
  task: str,
  rows: Sequence[dict[str, Any]],
  selection_rows: Sequence[dict[str, Any]],
  report: Report,
  out: Path,
) -> str:
  """table.md: the selected lr of each run beside the paper's number, then every lr.

  ``selection_rows`` are the runs that selected the lr: ``rows`` themselves, or, for a task
  retrained on the whole train file, the grids on the validation split.
  """
  available = {k for row in rows for g in row["grid"] for k in g["metrics"]}
  extra = [
    (key, f"{label} at best-{rows[0]['select_metric']} epoch", scale)
    for key, label, scale in (
      ("best.test_error", "test error (%)", 100.0),
      ("best.test_loss", "test loss", 1.0),
    )
    if key in available and key != report.metric
  ]
  retrained = selection_rows is not rows
  select = selection_rows[0]["select_metric"]
  where = f"the lr selected on {select}"
  if report.learning_rate is not None:
    # The paper reports these numbers per lr: compare at its lr, not at a selected one.
    where = f"lr {report.learning_rate:g} (the paper's)"
    rows = [
      {**row, "selected": at_learning_rate(row, report.learning_rate) or row["selected"]}
      for row in rows
    ]
  text = [f"# {task}: {report.label}, median over seeds at {where}\n"]
  if report.paper:
    text.append(
      f"Paper: {report.source}. The paper's GELU is `gelu_tanh`; it reports no numbers for the "
      "other activations.\n"
    )
  text.append(
    sweep.format_table(
      rows,
      metric=report.metric,
      label=report.label,
      scale=report.scale,
      paper=report.paper,
      extra=extra,
    )
  )
  text.append(
    "Diverged members are left out of every statistic and counted in `diverged`; an lr whose "
    "members all diverged is never selected. std is the sample standard deviation over seeds.\n"
  )
  text.append(RANKING_INTRO)
  columns = [(report.metric, report.label, report.scale), *extra]
  by_dropout: dict[float, list[dict[str, Any]]] = {}
  for row in rows:
    by_dropout.setdefault(row["dropout"], []).append(row)
  for rate, group in by_dropout.items():
    if len(by_dropout) > 1:
      text.append(f"### Dropout rate {rate:g}\n")
    ranked = [
      sweep.Ranked(heading, sweep.selected_values(group, key), scale)
      for key, heading, scale in columns
    ]
    text.append(sweep.format_ranking(ranked))
  if retrained:
    text.append(
      "The rows above are runs retrained on the whole train file at the lr selected on the "
      "validation split, as the paper does; the selection:\n"
    )
  elif report.learning_rate is not None:
    text.append(
      f"The rows above are at the paper's lr {report.learning_rate:g}; below, every lr, with "
      f"`(selected)` marking the one of lowest median best {select}:\n"
    )
  text.append("## Every learning rate\n")
  text.append(
    sweep.format_grid(selection_rows, metric=report.metric, label=report.label, scale=report.scale)
  )
  table = "\n".join(text)
  (out / "table.md").write_text(table)
  return table


def list_deviations(
  task: str,
  paper: Any,
  spec: Any,
  *,
  seeds: Sequence[int],
  learning_rates: Sequence[float],
  activations: Sequence[str],
  dropout_rates: Sequence[float],
  noise: bool,
) -> list[str]:
  """Every way this reproduction's protocol differs from the paper's, from the specs compared."""
  deviations = []
  if spec.dataset != paper.dataset:
    deviations.append(f"Dataset: {spec.dataset} instead of the paper's {paper.dataset}.")
  varied = {"name", "dataset", "activation", "dropout", "learning_rates", "seeds"}
  for field in dataclasses.fields(spec):
    ours, theirs = getattr(spec, field.name), getattr(paper, field.name)
    if field.name not in varied and ours != theirs:
      deviations.append(f"{field.name}: {ours!r} instead of the paper's {theirs!r}.")
  if len(seeds) != paper.seeds:
    deviations.append(
      f"Runs per setting: {len(seeds)} (seeds {list(seeds)}) instead of {paper.seeds}."
    )
  if tuple(learning_rates) != tuple(paper.learning_rates):
    deviations.append(
      f"Learning rates: {list(learning_rates)} instead of the paper's {list(paper.learning_rates)}."
    )
  paper_rates = (0.0,) if noise else PAPER_DROPOUT_RATES.get(task, (paper.dropout,))
  if tuple(dropout_rates) != tuple(paper_rates):
    deviations.append(f"Dropout rates: {list(dropout_rates)} instead of {list(paper_rates)}.")
  missing = [a for a in PAPER_ACTIVATIONS if a not in activations]
  if missing:
    deviations.append(f"Activations of the paper not run: {', '.join(missing)}.")
  added = [a for a in activations if a not in PAPER_ACTIVATIONS]
  if added:
    deviations.append(
      f"Activations added that the paper reports no numbers for: {', '.join(added)} (the "
      "paper's GELU is `gelu_tanh`; `gelu` is the exact erf form)."
    )
  if task == "twitter_pos" and not spec.data_options.get("embeddings"):
    deviations.append(
      "Twitter POS without the paper's pretrained 50-d tweet embeddings (not publicly "
      "retrievable): the task's substitute embeddings are used (see gelujax.tasks)."
    )
  if noise:
    deviations.append(
      f"(choice) Noise levels a = linspace(0, 3, {len(NOISE_LEVELS)}), added to pixels in [0, 1] "
      "without clipping; the paper states only that a goes up to 3."
    )
  return deviations


def describe_machine() -> str:
  """Platform, CPU and accelerator devices, for the README."""
  import jax

  cpu = platform.processor() or platform.machine()
  cpuinfo = Path("/proc/cpuinfo")
  if cpuinfo.exists():
    names = [
      line.split(":", 1)[1].strip()
      for line in cpuinfo.read_text().splitlines()
      if line.startswith("model name")
    ]
    cpu = names[0] if names else cpu
  kinds: dict[str, int] = {}
  for device in jax.devices():
    kind = f"{device.device_kind} ({device.platform})"
    kinds[kind] = kinds.get(kind, 0) + 1
  devices = ", ".join(f"{n} x {kind}" for kind, n in kinds.items())
  return (
    f"{platform.platform()}; CPU: {cpu}, {os.cpu_count()} cores; devices: {devices}; "
    f"jax {jax.__version__}, Python {platform.python_version()}"
  )


def write_readme(
  out: Path,
  *,
  title: str,
  command: str,
  settings: Sequence[str],
  wall_time: float,
  deviations: Sequence[str],
  files: Sequence[str],
  table: str,
) -> None:
  """README.md of a reproduction, written from what it ran."""
  lines = [
    f"# {title}",
    "",
    "Command (from the repository root):",
    "",
    "```bash",
    command,
    "```",
    "",
    *[f"- {s}" for s in settings],
    f"- Wall time of the invocation that wrote this file: {wall_time:.0f} s, on "
    f"{describe_machine()}.",
    *describe_training(read_timings(out)),
    f"- Written: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    "",
    "## Deviations from the paper's protocol",
    "",
    *([f"- {d}" for d in deviations] or ["- None."]),
    "",
    "## Files",
    "",
    *[f"- {f}" for f in files],
    "",
    "## Results",
    "",
    # table.md's headings, one level down inside this file.
    *[f"#{line}" if line.startswith("#") else line for line in table.splitlines()],
  ]
  (out / "README.md").write_text("\n".join(lines) + "\n")


def make_retrain_grids(grids: Sequence[Grid], rows: Sequence[dict[str, Any]]) -> list[Grid]:
  """Each run again on the whole train file (no validation split) at its selected lr."""
  retrain = []
  for grid, row in zip(grids, rows, strict=True):
    if row["selected"] is None:
      continue
    name = grid.name + RETRAIN_SUFFIX
    spec = grid.spec.replace(data_options={**grid.spec.data_options, "train_on_all": True})
    workdir = grid.workdir.parent / name
    retrain.append(Grid(name, spec, workdir, (row["selected"]["learning_rate"],)))
  return retrain


def reproduce_runs(
  task: str, grids: Sequence[Grid], out: Path, *, seeds: Sequence[int], data_dir: str | None
) -> tuple[str, list[str]]:
  """Trains the grids and writes table.md, summary.json and the figure; returns (table, files).

  For ``RETRAIN_TASKS`` the table's runs are the retrained ones, named like the grid they
  retrain, and the "every learning rate" part shows the selection on validation.
  """
  train_grids(grids, seeds=seeds, data_dir=data_dir, out=out)
  runs = [sweep.load_run(grid.workdir, grid.name) for grid in grids]
  rows = [sweep.summarize_run(run) for run in runs]
  selection_rows = rows
  if task in RETRAIN_TASKS:
    retrain = make_retrain_grids(grids, rows)
    train_grids(retrain, seeds=seeds, data_dir=data_dir, out=out)
    runs = [sweep.load_run(grid.workdir, grid.name) for grid in retrain]
    rows = [
      {**sweep.summarize_run(run), "run": run.name.removesuffix(RETRAIN_SUFFIX)} for run in runs
    ]
  report = REPORTS.get(task) or default_report(rows)
  table = write_table(task, rows, selection_rows, report, out)
  if task == "mnist_ae":
    figure = draw_autoencoder_figure(runs, rows, out)
  else:
    figure = draw_loss_figure(task, runs, rows, out)
  writers.write_json(
    out / "summary.json",
    {
      "task": task,
      "report": dataclasses.asdict(report),
      "rows": rows,
      "selection_rows": selection_rows,
    },
  )
  return table, [
    "table.md: the table below",
    "summary.json: the table's numbers (every lr of every run, median/mean/std over seeds)",
    f"{figure.name}: median over seeds with min–max bands",
    "runs/<run>/: the trainer's workdirs: config.json, metrics.jsonl, summary.json (and "
    "tensorboard/, checkpoints/, which git does not track under results/)",
  ]


def find_classifier_workdir(grid: Grid, shared: Path, seeds: Sequence[int]) -> Grid:
  """The grid, moved to the classifier task's finished workdir of the same run when there is one."""
  try:
    finished = sweep.finished_summary(
      shared, seeds=seeds, learning_rates=grid.learning_rates, epochs=grid.spec.epochs
    )
  except ValueError as e:
    print(f"{grid.name}: not reusing {shared}: {e}", flush=True)
    return grid
  return dataclasses.replace(grid, workdir=shared) if finished is not None else grid


def evaluate_noise_cached(
  grid: Grid, *, data_dir: str | None, out: Path, root: Path
) -> dict[str, Any]:
  """The run's noise evaluation at its selected lr, read back from out/noise/ when done before."""
  run = sweep.load_run(grid.workdir, grid.name)
  learning_rate = sweep.select_learning_rate(run)
  if learning_rate is None:
    raise ValueError(
      f"Every member of {grid.workdir} diverged: there are no {grid.name} classifiers to "
      "evaluate under noise. Lower --learning_rates or leave this activation out."
    )
  path = out / "noise" / f"{grid.name}.json"
  if path.exists():
    cached = writers.read_json(path)
    if cached["learning_rate"] == learning_rate and cached["levels"] == NOISE_LEVELS.tolist():
      print(f"{grid.name}: noise evaluation finished earlier: skipped", flush=True)
      return cached
  start = time.time()
  result = sweep.evaluate_noise(
    grid.workdir, learning_rate=learning_rate, levels=NOISE_LEVELS, data_dir=data_dir
  )
  result["workdir"] = repo_relative(grid.workdir, root)
  writers.write_json(path, result)
  print(f"{grid.name}: noise evaluation in {time.time() - start:.1f} s", flush=True)
  return result


def reproduce_noise(
  task: str,
  grids: Sequence[Grid],
  out: Path,
  *,
  seeds: Sequence[int],
  data_dir: str | None,
  root: Path,
) -> tuple[str, list[str]]:
  """Fig. 3: the classifier task's no-dropout runs (reused beside ``out`` when finished) under
  test-time noise; returns (table, files)."""
  shared = out.parent / task / "runs"
  grids = [find_classifier_workdir(g, shared / g.name, seeds) for g in grids]
  train_grids(grids, seeds=seeds, data_dir=data_dir, out=out)
  results = {g.name: evaluate_noise_cached(g, data_dir=data_dir, out=out, root=root) for g in grids}
  table = "\n".join(
    [
      f"# {task}{NOISE_SUFFIX}: test accuracy and log loss under Unif[-a, a] pixel noise\n",
      "Each run's classifiers at its selected lr (selected on validation loss), restored after "
      "their last epoch and evaluated on the test set; median over seeds. a = 1 lies between two "
      "evaluated levels and is interpolated linearly. Paper: GELU's accuracy read off Fig. 3 "
      "(approximate); its GELU is `gelu_tanh`.\n",
      sweep.format_noise_table(results, paper=PAPER_NOISE_ACCURACY),
      RANKING_INTRO,
      sweep.format_ranking(
        [
          sweep.Ranked(
            f"{name} a={a:g}",
            {run: sweep.noise_values(r, key, a) for run, r in results.items()},
            lower_is_better=key == "loss",
          )
          for key, name in (("accuracy", "test accuracy"), ("loss", "test log loss"))
          for a in (1.0, 3.0)
        ]
      ),
    ]
  )
  (out / "table.md").write_text(table)
  labels = {
    f"{name} (lr {r['learning_rate']:g}"
    + (f", {r['diverged']}/{r['members']} diverged)" if r["diverged"] else ")"): r
    for name, r in results.items()
  }
  figure = plots.save_figure(
    plots.plot_noise(
      labels, title=f"{task} on {grids[0].spec.dataset}: robustness to input noise (test set)"
    ),
    out / "noise_robustness.png",
  )
  writers.write_json(out / "summary.json", {"task": task + NOISE_SUFFIX, "runs": results})
  workdirs = sorted({repo_relative(g.workdir.parent, root) for g in grids})
  return table, [
    "table.md: the table below",
    "summary.json: accuracy and log loss per seed and noise level for every run",
    f"{figure.name}: median over seeds with min–max bands",
    "noise/<run>.json: each run's noise evaluation",
    f"classifier workdirs: {', '.join(workdirs)}",
  ]


def reproduce(
  task: str | None,
  *,
  root: Path,
  command: str,
  dataset: str | None = None,
  activations: Sequence[str] | None = None,
  seeds: Sequence[str] | None = None,
  learning_rates: Sequence[str] | None = None,
  dropout_rates: Sequence[str] | None = None,
  epochs: int | None = None,
  data_dir: str | None = None,
  embeddings: str | None = None,
  out: str | Path | None = None,
) -> Path:
  """The whole reproduction of ``task``; ValueError on a bad value, before any work.

  Args:
    task: one of ``PAPER_TASKS`` (or any registered task, or ``<task>_noise``).
    root: the repository: results go to ``root/results/<dataset>/<task>/`` by default, and
      paths inside it are written relative to it.
    command: the command line, recorded in the README.
    dataset, epochs, embeddings: override the task's fields (None: the paper's).
    activations: the runs' activations (None: ``DEFAULT_ACTIVATIONS``).
    seeds, learning_rates, dropout_rates: the list flags as given on the command line (None:
      the task's); see ``gelujax.cli``.
    data_dir: where the dataset's files are.
    out: the output directory.

  Returns:
    The output directory.
  """
  start = time.time()
  if not task:
    raise ValueError(f"--task is required: one of {', '.join(PAPER_TASKS)}.")
  noise = task.endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  paper, spec = cli.make_spec(base, dataset=dataset, epochs=epochs, embeddings=embeddings)
  out = Path(out or root / "results" / spec.dataset / task)
  seeds = cli.parse_seeds(seeds, spec.seeds)
  learning_rates = cli.parse_floats("learning_rates", learning_rates, spec.learning_rates)
  activations = list(activations or DEFAULT_ACTIVATIONS)
  default_rates = (0.0,) if noise else PAPER_DROPOUT_RATES.get(base, (spec.dropout,))
  rates = cli.parse_floats("dropout_rates", dropout_rates, default_rates)
  if noise and rates != [0.0]:
    raise ValueError(
      f"--dropout_rates {dropout_rates} with --task {task}: the noise experiment "
      "evaluates the no-dropout classifiers only; leave --dropout_rates out."
    )
  grids = make_grids(spec, activations, rates, learning_rates, out)
  out.mkdir(parents=True, exist_ok=True)
  options = {"seeds": seeds, "data_dir": data_dir}
  if noise:
    table, files = reproduce_noise(base, grids, out, root=root, **options)
  else:
    table, files = reproduce_runs(base, grids, out, **options)
  write_readme(
    out,
    title=f"GELU paper reproduction: {task} on {spec.dataset}",
    command=command,
    settings=[
      f"Task {base}: model {spec.model}, batch size {spec.batch_size}, {spec.epochs} epochs",
      f"Activations: {', '.join(activations)}",
      f"Dropout rates: {', '.join(f'{r:g}' for r in rates)}",
      f"Learning rates: {', '.join(f'{lr:g}' for lr in learning_rates)} "
      f"({describe_selection(base)})",
      f"Seeds: {', '.join(map(str, seeds))}",
      *(
        [
          f"Then each run retrained on the whole train file at its selected lr (runs/<run>"
          f"{RETRAIN_SUFFIX}/), as the paper does; the table reports those runs"
        ]
        if base in RETRAIN_TASKS and not noise
        else []
      ),
    ],
    wall_time=time.time() - start,
    deviations=list_deviations(
      base,
      paper,
      spec,
      seeds=seeds,
      learning_rates=learning_rates,
      activations=activations,
      dropout_rates=rates,
      noise=noise,
    ),
    files=files,
    table=table,
  )
  return out
