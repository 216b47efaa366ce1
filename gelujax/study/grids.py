"""The runs a study trains, and training them: selection grids, then evaluation runs.

Each activation (and, for MNIST, each dropout rate) is one run: its learning-rate x seed grid is
trained as members by :func:`gelujax.engine.fit` into ``<out>/runs/<run>/`` (the *selection*
grid; its seeds are the selection seeds). Each run's *evaluation* run, ``<out>/runs/<run>_eval/``,
holds fresh seeds trained at the lr selected on the selection seeds (or, for a task that selects
nothing, at every lr); each other candidate lr of the run (``gelujax.paper.DESIGN_CHANGES``) has
its own, ``<out>/runs/<run>_eval_lr<lr>/``, with the same seeds. Finished runs (their
summary.json) are skipped and partial ones resume from their checkpoints, so a killed study
restarts where it stopped; each training's time and machine are added to
``<out>/timings.json`` as it trains.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gelujax import host
from gelujax import workdir as workdirs
from gelujax.members import Members
from gelujax.paper import DEFAULT_ACTIVATIONS, PAPER, Design
from gelujax.study import runs
from gelujax.workdir import CONFIG_FILE, SUMMARY_FILE, read_json

TIMINGS_FILE = "timings.json"


@dataclasses.dataclass(frozen=True)
class Grid:
  """One run of a study: its name, spec, workdir and learning rates; ``seeds``, where it trains
  seeds of its own (a negative control's other set), else the study's."""

  name: str
  spec: Any
  workdir: Path
  learning_rates: tuple[float, ...]
  seeds: tuple[int, ...] | None = None


def grid_name(activation: str, dropout: float, spec: Any) -> str:
  """The run's name: the activation, suffixed with the dropout rate where it is not the task's."""
  return runs.run_name(activation, None if dropout == spec.dropout else dropout)


def make_grids(
  spec: Any,
  activations: Sequence[str],
  dropout_rates: Sequence[float],
  learning_rates: Sequence[float],
  out: Path,
) -> list[Grid]:
  """The selection grid of every run, dropout-rate major.

  Raises:
    gelujax.tasks.SpecError: an activation or dropout rate the task cannot take.
  """
  grids = []
  for rate in dropout_rates:
    for activation in activations:
      name = grid_name(activation, rate, spec)
      run_spec = spec.replace(activation=activation, dropout=rate)
      grids.append(Grid(name, run_spec, out / "runs" / name, tuple(learning_rates)))
  return grids


@dataclasses.dataclass(frozen=True)
class Variant:
  """An arm of a study fixed in code that is more than an activation: the activation it trains
  and the model options it adds to the task's (a narrower feed-forward: ``{"hidden_features":
  384}``), under a name of its own. An arm that is only an activation is its activation's
  name.

  Attributes:
    activation: the activation spec it trains.
    model_options: added to the task's model options (`gelujax.tasks.TaskSpec.model_options`).
    words: what it is, in a few words (its row in the design's arms).
    seed_offset: where not 0, it trains the study's seeds each shifted by this: the same
      network on another set of seeds (a negative control), its seed s + offset paired with the
      other arms' seed s.
  """

  activation: str
  model_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  words: str = ""
  seed_offset: int = 0

  def seeds(self, seeds: Sequence[int]) -> tuple[int, ...]:
    """The seeds it trains where the study trains ``seeds``."""
    return tuple(s + self.seed_offset for s in seeds)


def arm_spec(spec: Any, arm: str, variants: Mapping[str, Variant]) -> Any:
  """``spec`` as the arm ``arm`` trains it: with ``arm`` as its activation, or, for an arm of
  ``variants``, that variant's activation and model options."""
  variant = variants.get(arm)
  if variant is None:
    return spec.replace(activation=arm)
  options = {**spec.model_options, **variant.model_options}
  return spec.replace(activation=variant.activation, model_options=options)


def arm_grids(
  spec: Any,
  arms: Sequence[str],
  out: Path,
  learning_rates: Callable[[str], Sequence[float]],
  variants: Mapping[str, Variant] | None = None,
  seeds: Sequence[int] = (),
) -> list[Grid]:
  """One grid per arm of ``arms`` (``spec`` as :func:`arm_spec` makes it), in
  ``out/runs/<run>/`` as `gelujax.study.runs.run_name` names the arm, at
  ``learning_rates(arm)``: a study fixed in code; a variant with a seed offset trains
  ``seeds`` shifted (:meth:`Variant.seeds`)."""
  variants = variants or {}
  return [
    Grid(
      runs.run_name(arm),
      arm_spec(spec, arm, variants),
      out / "runs" / runs.run_name(arm),
      tuple(learning_rates(arm)),
      variants[arm].seeds(seeds) if arm in variants and variants[arm].seed_offset else None,
    )
    for arm in arms
  ]


def activation_order(activation: str) -> tuple[int, str]:
  """Sorts activations as ``DEFAULT_ACTIVATIONS`` lists them, others after, by name."""
  known = DEFAULT_ACTIVATIONS
  return (known.index(activation) if activation in known else len(known), activation)


def find_grids(out: Path, spec: Any) -> list[Grid]:
  """The finished selection grids under ``out/runs/`` (evaluation runs aside), dropout-rate
  major and in ``DEFAULT_ACTIVATIONS`` order, for re-rendering without training."""
  runs_dir = out / "runs"
  found = []
  for workdir in sorted(runs_dir.glob("*/")) if runs_dir.is_dir() else []:
    if runs.evaluated_run(workdir.name) is not None:
      continue
    run = runs.load_run(workdir)  # ValueError when unfinished: nothing is trained here.
    found.append((run.dropout, activation_order(run.activation), workdir, run))
  if not found:
    raise ValueError(
      f"`render`: {runs_dir} holds no runs to render. Pass the `task`, `dataset` (or `out`) of a "
      "reproduction that trained, or leave `render` out to train it."
    )
  return [
    Grid(workdir.name, spec, workdir, tuple(run.learning_rates()))
    for *_, workdir, run in sorted(found, key=lambda f: f[:2])
  ]


def evaluation_grids(
  task: str, grids: Sequence[Grid], rows: Sequence[runs.RunRow], design: Design
) -> list[Grid]:
  """Each run's evaluation runs beside it: ``<run>_eval`` at the lr its selection grid selected
  (none where every member diverged), then, where the design evaluates every candidate lr,
  ``<run>_eval_lr<lr>`` at each other candidate; or one ``<run>_eval`` at every lr where the
  design selects nothing. For a task the paper retrains (``PaperTask.retrain``), each is
  trained on the whole train file (no validation split), as the paper does."""
  evaluation = []
  for grid, row in zip(grids, rows, strict=True):
    if design.select_lr and row.selected is None:
      continue
    spec = grid.spec
    if task in PAPER and PAPER[task].retrain:
      spec = spec.replace(data_options={**spec.data_options, "train_on_all": True})
    if not design.select_lr:
      lrs = [(None, grid.learning_rates)]
    else:
      selected = row.selected.learning_rate
      candidates = row.candidates if design.candidates else []
      others = [lr for lr in candidates if not runs.same_lr(lr, selected)]
      lrs = [(None, (selected,)), *[(lr, (lr,)) for lr in others]]
    for name_lr, learning_rates in lrs:
      name = runs.evaluation_name(grid.name, name_lr)
      evaluation.append(Grid(name, spec, grid.workdir.parent / name, tuple(learning_rates)))
  return evaluation


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
          f"requested ({members.describe()}). Pass another `out` for the new grid."
        )
  if not (workdir / SUMMARY_FILE).exists():
    return None
  summary = read_json(workdir / SUMMARY_FILE)
  if summary["epochs"] > epochs:
    raise ValueError(
      f"{workdir / SUMMARY_FILE} holds a run of {summary['epochs']} epochs, more than the "
      f"{epochs} requested. Pass `epochs` {summary['epochs']} to use it, or another `out`."
    )
  return summary if summary["epochs"] == epochs else None


def run_grid(
  spec: Any,
  workdir: str | Path,
  members: Members,
  *,
  data_dir: str | None = None,
  progress: bool = True,
  loaded: dict[tuple, Any] | None = None,
  clock: contextlib.AbstractContextManager | None = None,
) -> tuple[dict[str, Any], bool]:
  """Trains one run's grid ``members``, unless the workdir already finished it.

  A partial workdir (checkpoints but no summary for ``spec.epochs``) is resumed by the trainer.
  A grid whose members all diverge is a result too (every lr then shows n/n diverged).
  ``loaded`` keeps the data read for a grid, by what determines them, for the next grids of
  the same data (one invocation's grids read each data set once). ``clock`` is entered around
  the training (the data read and the fit), not around the check that skips a finished grid.

  Returns:
    ``(summary, trained)``: the run's summary and whether this call trained.
  """
  summary = finished_summary(workdir, members, spec.epochs)
  if summary is not None:
    return summary, False
  # Imported here so that reading results and drawing tables needs no accelerator stack.
  from gelujax import engine, tasks

  with clock or contextlib.nullcontext():
    if loaded is None:
      splits = spec.load_data(data_dir)
    else:
      key = (spec.dataset, repr(spec.data_options), spec.preprocessing, data_dir)
      if key not in loaded:
        loaded.clear()  # one data set held at a time
        loaded[key] = spec.load_data(data_dir)
      splits = loaded[key]
    try:
      summary = engine.fit(tasks.build(spec, splits), str(workdir), members, progress=progress)
    except engine.DivergedError:
      summary = read_json(Path(workdir) / SUMMARY_FILE)
  return summary, True


def train_grids(
  grids: Sequence[Grid],
  *,
  seeds: Sequence[int],
  data_dir: str | None,
  out: Path,
  after: Callable[[Grid], Any] | None = None,
) -> None:
  """Trains (or skips, or resumes) every grid, one progress line each; records training time
  in ``out/timings.json`` every :data:`CLOCK_SECONDS` while a grid trains and when it ends,
  so that a killed invocation (Ctrl-C, SIGTERM, or SIGKILL and a session's end, which run no
  handler) keeps the time it trained but the last few seconds. ``after`` is called with each
  grid once it is finished (trained now or before)."""
  timings = read_timings(out)
  machine = host.describe_machine()
  loaded: dict[tuple, Any] = {}
  for i, grid in enumerate(grids, 1):
    lrs = ", ".join(f"{lr:g}" for lr in grid.learning_rates)
    trains = grid.seeds or tuple(seeds)
    print(
      f"[{i}/{len(grids)}] {grid.name}: lrs {lrs} x {len(trains)} seeds, {grid.spec.epochs} "
      "epochs ...",
      flush=True,
    )
    clock = _Clock(timings, grid.name, machine, out / TIMINGS_FILE)
    _, trained = run_grid(
      grid.spec, grid.workdir, Members(grid.learning_rates, trains), data_dir=data_dir,
      loaded=loaded, clock=clock,
    )  # fmt: skip
    done = f"trained in {clock.elapsed:.1f} s" if trained else "finished earlier: skipped"
    print(f"[{i}/{len(grids)}] {grid.name}: {done} ({grid.workdir})", flush=True)
    if after is not None:
      after(grid)


# How often a training grid's time is written to timings.json: what a SIGKILL can lose.
CLOCK_SECONDS = 5.0


class _Clock:
  """A grid's training time added to its ``timings`` entry and written to ``path`` every
  :data:`CLOCK_SECONDS` from a thread while the ``with`` block runs, and once more as it ends,
  however it ends; ``timings`` is untouched unless it is entered."""

  def __init__(self, timings: dict[str, Any], name: str, machine: str, path: Path):
    self.timings, self.name, self.machine, self.path = timings, name, machine, path
    self.elapsed = 0.0
    self.lock = threading.Lock()
    self.stopped = threading.Event()
    self.thread = threading.Thread(target=self._tick, daemon=True)

  def write(self) -> None:
    with self.lock:
      self.elapsed = time.monotonic() - self.start
      self.timing["seconds"] = self.before + self.elapsed
      workdirs.write_json(self.path, self.timings)

  def _tick(self) -> None:
    while not self.stopped.wait(CLOCK_SECONDS):
      self.write()

  def __enter__(self) -> _Clock:
    self.timing = self.timings.setdefault(self.name, {"seconds": 0.0, "machines": []})
    if self.machine not in self.timing["machines"]:
      self.timing["machines"].append(self.machine)
    self.before = self.timing["seconds"]
    self.start = time.monotonic()
    self.write()
    self.thread.start()
    return self

  def __exit__(self, *exc: Any) -> None:
    self.stopped.set()
    self.thread.join()
    self.write()


def read_timings(out: Path) -> dict[str, dict[str, Any]]:
  """``out/timings.json``: run -> its training time summed over the invocations that trained it
  (``seconds``) and the machines they ran on (``machines``, in order). A file written before
  machines were recorded holds bare seconds; their machines read as unknown ([])."""
  path = out / TIMINGS_FILE
  timings = workdirs.read_json(path) if path.exists() else {}
  return {
    name: t if isinstance(t, dict) else {"seconds": t, "machines": []}
    for name, t in timings.items()
  }


def find_classifier_workdir(grid: Grid, shared: Path, seeds: Sequence[int]) -> Grid:
  """The grid, moved to the classifier task's finished workdir of the same run when there is one."""
  try:
    finished = finished_summary(shared, Members(grid.learning_rates, seeds), grid.spec.epochs)
  except ValueError as e:
    print(f"{grid.name}: not reusing {shared}: {e}", flush=True)
    return grid
  return dataclasses.replace(grid, workdir=shared) if finished is not None else grid


def repo_relative(path: Path, root: Path) -> str:
  """``path`` relative to the repository ``root`` when inside it (results are committed), else
  absolute."""
  path, root = path.resolve(), root.resolve()
  return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
