"""The training loop: `fit` trains a grid of parts into a workdir, `restore` reads it back,
`evaluate_members` and `predict_members` evaluate a restored grid on a split.

`fit` takes built parts (`gelujax.parts.Parts`, from `gelujax.tasks.build`), a workdir
and `Members`, checks the workdir once (`gelujax.workdir.check_run`), makes the parts' model,
optimizer and objective into a program (`make_program`), and runs the jitted programs of
`gelujax.engine.mesh` epoch by epoch, writing records (`gelujax.writers`) and checkpoints
(`gelujax.checkpoints`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import sys
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from gelujax import checkpoints, data, host, writers
from gelujax import workdir as workdirs
from gelujax.engine.mesh import (
  Program,
  check_strategy,
  describe_layout,
  make_mesh,
  make_program,
  to_host,
)
from gelujax.engine.step import TrainState
from gelujax.members import Members
from gelujax.parts import Parts

_EVAL_SPLITS = ("validation", "test")


class DivergedError(RuntimeError):
  """Every member of a run diverged (its training loss became non-finite)."""


@dataclasses.dataclass(frozen=True)
class _Placed:
  """A run's program and its inputs on the devices: the members' seeds and learning rates, the
  training split, and the evaluation splits with their sizes (what the objective counts in
  each, `gelujax.objectives.Objective.count`); ``members`` as records name them."""

  program: Program
  members: list[dict[str, Any]]
  seeds: jax.Array
  learning_rates: jax.Array
  train: dict[str, jax.Array]
  evals: dict[str, tuple[dict[str, jax.Array], int]]


def check_fit(
  record: Mapping[str, Any],
  workdir: str,
  members: Members,
  *,
  epochs: int,
  batch_size: int,
  checkpoint_every: int = 1,
  members_axis: int | None = None,
  member_strategy: str = "auto",
  extendable: bool = False,
) -> tuple[dict[str, Any] | None, Mesh]:
  """What `fit` checks before anything else, from settings alone: the workdir can take the run
  of ``record`` (`gelujax.workdir.check_run`), the checkpoint interval, the member strategy, and
  the mesh, with the batch split evenly over its data axis. A command calls it before it reads
  the data (or downloads them), so that a refusal costs nothing; `fit` calls it again.
  ``extendable``: whether the run may resume for another number of ``epochs``
  (`gelujax.parts.Parts.extendable`).

  Returns:
    The config of the run the workdir holds (None for a new workdir) and the run's mesh.

  Raises:
    ValueError: naming the argument and what would be valid.
  """
  checked = workdirs.check_run(record, epochs, workdir, members, extendable=extendable)
  if checkpoint_every < 1:
    raise ValueError(f"checkpoint_every is {checkpoint_every}; it must be at least 1.")
  check_strategy(member_strategy)
  mesh = make_mesh(len(members), members_axis)
  if batch_size % mesh.shape["data"]:
    raise ValueError(
      f"`batch_size` is {batch_size}; it must be a multiple of the {mesh.shape['data']} "
      "devices of the mesh's data axis, since every batch is split evenly over them."
    )
  return checked, mesh


def _place(parts: Parts, members: Members, mesh: Mesh, member_strategy: str) -> _Placed:
  """The run's program (`make_program`) on ``mesh``, its settings checked against the data and
  its inputs placed."""
  program = make_program(parts, mesh, len(members), member_strategy)
  splits = parts.splits
  steps, items = program.steps_per_epoch, program.config.num_items
  if items < parts.batch_size:
    raise ValueError(
      f"`batch_size` {parts.batch_size} is larger than the training split ({items} items); it "
      f"must be at most {items}."
    )
  total, most = parts.epochs * steps, int(np.iinfo(np.int32).max)
  if total > most:  # The program counts a member's steps, and draws its keys from them, in int32.
    raise ValueError(
      f"`epochs` {parts.epochs} of {steps:,} steps (`batch_size` {parts.batch_size}, {items:,} "
      f"items) make {total:,} steps, more than the int32 step counter holds ({most:,}); train "
      "fewer `epochs` or with a larger `batch_size`."
    )
  if not 1 <= parts.evals_per_epoch <= steps:
    raise ValueError(
      f"evals_per_epoch {parts.evals_per_epoch} does not fit an epoch of {steps} "
      f"step{'s' * (steps != 1)} (`batch_size` {parts.batch_size}, {items} items); it must lie "
      f"in [1, {steps}]: use fewer evaluations per epoch or a smaller batch size."
    )
  member = jax.tree.map(
    lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype), program.abstract_state()
  )
  per_device = program.padded_members // mesh.shape["members"]
  host.check_memory(member, member.params, per_device, len(members), splits)
  # A split's means divide its sums by what the objective counts in it: examples, or tokens.
  evals = {
    name: (program.put_eval_split(splits[name]), parts.objective.count(splits[name]))
    for name in _EVAL_SPLITS
    if name in splits
  }
  seeds, learning_rates = program.put_members(members)
  train = program.put_data(splits["train"])
  return _Placed(program, members.to_json(), seeds, learning_rates, train, evals)


@host.signals_remembered()
def fit(
  parts: Parts,
  workdir: str,
  members: Members | None = None,
  *,
  progress: bool = True,
  checkpoint_every: int = 1,
  keep_checkpoints: int = 2,
  members_axis: int | None = None,
  member_strategy: str = "auto",
) -> dict[str, Any]:
  """Trains the grid ``members`` of ``parts`` into ``workdir``.

  A workdir that holds a checkpoint of this run resumes from its newest readable checkpoint
  (``parts.epochs`` may have grown where ``parts.extendable``); results are bitwise equal to an
  uninterrupted run.

  Args:
    parts: what is trained (`gelujax.tasks.build` of a task spec and its data).
    workdir: where config.json, metrics.jsonl, tensorboard/, checkpoints/ and summary.json go.
    members: the grid; default: the parts' own (``parts.grid``).
    progress: show a progress bar.
    checkpoint_every: save a checkpoint every this many epochs (and after the first and the
      last: a workdir with records past epoch 1 and no checkpoint lost its checkpoints).
    keep_checkpoints: how many of the newest checkpoints to keep (>= 2).
    members_axis: devices along the mesh's ``members`` axis (default: `choose_layout`).
    member_strategy: how each device takes its members, ``"auto"`` (the measured rule,
      `gelujax.engine.mesh.choose_strategy`; a resume keeps the strategy its run recorded),
      ``"vmap"`` or ``"map"``; recorded in config.json and the run's layout line, not part of
      the run's identity (a run may resume with another, asked for: then to float32 rounding).

  Returns:
    The summary.json object.

  Raises:
    ValueError: bad settings, or a workdir that holds another run (nothing is written).
    DivergedError: every member diverged (summary.json is written first).
  """
  members = members or parts.grid
  checked, mesh = check_fit(
    parts.record,
    workdir,
    members,
    epochs=parts.epochs,
    batch_size=parts.batch_size,
    checkpoint_every=checkpoint_every,
    members_axis=members_axis,
    member_strategy=member_strategy,
    extendable=parts.extendable,
  )
  config = workdirs.make_config(parts.record, members)
  lead = jax.process_index() == 0
  # Where the data came from and what was verified: recorded, never part of the run's identity
  # (`workdir.identity` and `check_run` read the record and the members only); a resume on
  # other data (another file's sha256) is refused, so every epoch of a run saw the same data.
  record = getattr(parts.splits, "info", {}).get("record")
  if record is not None:
    workdirs.check_same_data(checked, record, workdir)
    config["data"] = record
    if progress and lead:
      print(f"gelujax: {data.describe_record(record)}", file=sys.stderr, flush=True)
  # A resume under "auto" keeps the strategy the run recorded (vmap, the one strategy before
  # strategies were recorded), so that it goes on as one program, bitwise, whatever the rule
  # says today; a strategy asked for is taken.
  kept = member_strategy == "auto" and checked is not None
  if kept:
    member_strategy = checked.get("member_strategy", "vmap")
  placed = _place(parts, members, mesh, member_strategy)
  program, num = placed.program, len(members)
  # Recorded, not part of the run's identity: the strategy the run goes on with, and (by
  # `_resume`, once the epoch it resumes from is known) which epochs each strategy trained.
  config["member_strategy"] = program.strategy
  # The versions (and git commit) of every invocation that ran it: recorded, not its identity.
  config[workdirs.SOFTWARE] = workdirs.software_record(checked)
  # Where the grid lies, any padding, and how a device takes its members (where it has several).
  if progress and lead and (program.mesh.size > 1 or program.padded_members > 1):
    why = "as the run began: a resume stays one program" if kept else program.strategy_reason
    layout = describe_layout(num, program.mesh, program.strategy, why)
    print(f"gelujax: {layout}.", file=sys.stderr, flush=True)
  bounds = [0, *evaluation_steps(program.steps_per_epoch, parts.evals_per_epoch)]
  # One writer, holding the workdir as checked; a full disk is one line naming the file.
  with workdirs.writing(workdir, lead, checked):
    checkpointer = checkpoints.Checkpointer(workdir, keep_checkpoints, config)
    start, state, records = _resume(workdir, config, placed, checkpointer, bounds, lead, checked)
    steps, finished = program.steps_per_epoch, start >= parts.epochs
    writer = (
      lead
      and not finished
      and writers.MetricsWriter(
        workdir,
        placed.members,
        purge_step=start * steps + 1,
        hparams=_hparams(config),
        step_loss_every=writers.step_loss_interval(steps),
      )
    )
    if finished and progress and lead:  # Said once, instead of a full bar.
      print(
        f"gelujax: {workdir} already trained {start} of {parts.epochs} epochs; nothing to train.",
        file=sys.stderr,
        flush=True,
      )
    bar = writers.progress_bar(
      parts.epochs * steps,
      start * steps,
      progress and lead and not finished,
      f"epoch {start + 1}/{parts.epochs}",
    )
    show = functools.partial(_show_progress, bar, placed.members, parts.select_metric)
    diverged = program.diverged_steps(state) >= 0
    try:
      for epoch in range(start + 1, parts.epochs + 1):
        bar.set_description(f"epoch {epoch}/{parts.epochs}", refresh=False)
        state, diverged = _train_epoch(placed, state, epoch, bounds, records, writer, show)
        if epoch in (1, parts.epochs) or epoch % checkpoint_every == 0 or diverged.all():
          checkpointer.save(epoch, program.unpad(state), records)
        if diverged.all():
          break
    finally:
      bar.close()
      checkpointer.close()
      if writer:
        writer.close()
    return _finish(workdir, config, parts, program, state, diverged)


def _resume(
  workdir, config, placed: _Placed, checkpointer, bounds, lead, checked
) -> tuple[int, Any, list]:
  """``(epochs done, state, records)``: from the newest readable checkpoint, or a new run.
  Process 0 rewrites metrics.jsonl to the checkpoint's records and writes config.json, whose
  ``member_strategies`` (`strategy_segments`) says which epochs each strategy trained."""
  program = placed.program
  restored = checkpointer.restore_latest(program.abstract_state())
  if restored is None:
    start, recorded = 0, []
    state = program.init(placed.seeds, placed.learning_rates)
  else:
    start, recorded = restored.epoch, restored.metrics
    state = program.pad(restored.state)
  records = list(recorded or [])
  config["member_strategies"] = strategy_segments(checked, start, program.strategy)
  if lead:
    steps, num = program.steps_per_epoch, program.num_members
    evaluations = [
      (member, *_evaluation_point(epoch, last, steps))
      for epoch in range(1, start + 1)
      for last in bounds[1:]
      for member in range(num)
    ]
    records = workdirs.resume_metrics(workdir, start, recorded, evaluations)
    workdirs.write_config(workdir, config)
  return start, state, records


def strategy_segments(
  checked: Mapping[str, Any] | None, start: int, strategy: str
) -> list[list[Any]]:
  """``[[first epoch, strategy], ...]``: which strategy trained which epochs of a run resumed
  after epoch ``start`` with ``strategy``, from the run's config.json ``checked`` (None: a new
  run). Segments that began after ``start`` are dropped (their epochs are trained again); a run
  recorded before segments were kept trained in its one recorded strategy (vmap before
  strategies were recorded)."""
  if checked is None or start == 0:
    return [[1, strategy]]
  before = checked.get("member_strategies") or [[1, checked.get("member_strategy", "vmap")]]
  kept = [list(segment) for segment in before if segment[0] <= start]
  return kept if kept[-1][1] == strategy else [*kept, [start + 1, strategy]]


def _train_epoch(
  placed: _Placed, state, epoch: int, bounds: list[int], records: list, writer, show
):
  """One epoch of every member, evaluated after each segment of ``bounds``: the state and which
  members have diverged. Appends the evaluations' records to ``records`` (and writes them and
  the steps' losses, on process 0); ``show(steps, metrics, diverged)`` moves the progress bar
  after each segment."""
  program, num = placed.program, placed.program.num_members
  batches = program.shuffle(placed.seeds, np.int32(epoch))
  for first, last in itertools.pairwise(bounds):
    # Every piece is dispatched before the first is waited for, so the device never waits on
    # the bar; the bar moves as each piece's losses arrive. A program that holds a collective
    # is waited for before the next is dispatched: two in flight can deadlock the devices
    # (`gelujax.engine.mesh`, "No collective along members").
    dispatched = []
    for start, stop in pieces(first, last):
      if program.holds_collectives:
        jax.block_until_ready(state)
      state, losses = program.train_segment(
        state,
        placed.train,
        batches,
        placed.seeds,
        placed.learning_rates,
        epoch=np.int32(epoch),
        first_step=np.int32(start),
        num_steps=stop - start,
      )
      dispatched.append((stop - start, losses))
    if program.holds_collectives:
      jax.block_until_ready(state)
    fetched = []
    for i, (steps, losses) in enumerate(dispatched):
      fetched.append(to_host(losses)[:num])
      if i < len(dispatched) - 1:  # The last piece moves the bar with the evaluation's note.
        show(steps, None, None)
    losses_MxS = np.concatenate(fetched, axis=1)
    metrics = {"train_loss": losses_MxS.mean(axis=1, dtype=np.float64)}
    for name, (split, size) in placed.evals.items():
      for key, mean in program.mean_metrics(state, split, size).items():
        metrics[f"{name}_{key}"] = mean
    diverged = program.diverged_steps(state) >= 0
    point = _evaluation_point(epoch, last, program.steps_per_epoch)
    records += writers.make_records(placed.members, *point, diverged, metrics)
    if writer:
      writer.write_step_losses(point[1] - (last - first), losses_MxS)
      writer.write(records[-num:])
    show(dispatched[-1][0], metrics, diverged)
    host.raise_if_interrupted()  # A kill whose exception a finalizer swallowed stops here.
  return state, diverged


PIECE_STEPS = 50
"""The most training steps between two moves of the progress bar (`pieces`)."""


def pieces(first: int, last: int, most: int = PIECE_STEPS) -> list[tuple[int, int]]:
  """Steps ``first`` to ``last`` of an epoch (one evaluation segment) as the ``(start, stop)``
  of the fewest near-equal pieces of at most ``most`` steps, each trained by its own call, so
  that the progress bar moves within a long epoch. The pieces are a function of the segment
  alone, so a resumed run trains in the same pieces (the same programs) as an uninterrupted
  one; at most two piece lengths, so at most two scan lengths compile."""
  count = max(1, -(-(last - first) // most))
  bounds = [first + (i * (last - first)) // count for i in range(count + 1)]
  return list(itertools.pairwise(bounds))


def evaluation_steps(steps_per_epoch: int, evals_per_epoch: int) -> list[int]:
  """The steps of an epoch after which the members are evaluated (the last: the epoch's end)."""
  return [round(i * steps_per_epoch / evals_per_epoch) for i in range(1, evals_per_epoch + 1)]


def _evaluation_point(epoch: int, last: int, steps_per_epoch: int) -> tuple[float, int]:
  """``(epoch, step)`` of metrics records written after step ``last`` of ``epoch``."""
  return epoch - 1 + last / steps_per_epoch, (epoch - 1) * steps_per_epoch + last


def _hparams(config: Mapping[str, Any]) -> dict[str, str | float]:
  """The run's hyperparameters TensorBoard's hparams plugin shows beside each member's learning
  rate and seed: its task, data set, activation and dropout rate, as config.json records them."""
  spec = config["spec"]
  return {
    "task": config["task"],
    "dataset": config["dataset"],
    "activation": str(config["activation"]),
    "dropout": float(spec.get("dropout", 0.0)),
  }


def _show_progress(
  bar, members: list[dict[str, Any]], select_metric: str, steps: int, metrics, diverged
) -> None:
  """Moves ``bar`` by ``steps``; with the note of `describe_progress` after an evaluation
  (``metrics`` None: a piece of training, the note kept). ``update`` draws it."""
  if metrics is not None:
    note = describe_progress(metrics, diverged, members, select_metric)
    bar.set_postfix_str(note, refresh=False)
  bar.update(steps)


def describe_progress(
  metrics: Mapping[str, np.ndarray],
  diverged: np.ndarray,
  members: list[dict[str, Any]],
  select_metric: str,
) -> str:
  """The progress bar's note: one member, the best still training by ``select_metric`` (its test
  counterpart where the run has no validation split, as `gelujax.workdir.summarize` selects;
  the training loss before either is there), named, with its losses at the last evaluation:
  ``"best lr=0.001 seed=0 by validation_loss: train_loss=0.31, validation_loss=0.29"``."""
  if diverged.all():
    return "every member diverged"
  key = select_metric
  if key not in metrics and key.startswith("validation_"):
    key = "test_" + key.removeprefix("validation_")
  if key not in metrics:
    key = "train_loss"
  values = np.asarray(metrics[key], np.float64)
  ranked = np.where(~diverged & np.isfinite(values), values, np.inf)
  best = int(np.argmin(ranked)) if np.isfinite(ranked).any() else int(np.argmin(diverged))
  member = members[best]
  shown = [k for k in metrics if "loss" in k or k == key]
  values_words = ", ".join(f"{k}={float(metrics[k][best]):.4g}" for k in shown)
  return f"best lr={member['learning_rate']:g} seed={member['seed']} by {key}: {values_words}"


def _finish(workdir, config, parts: Parts, program, state, diverged) -> dict[str, Any]:
  """Writes summary.json; raises DivergedError when no member is left."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("gelujax metrics written")
  steps_per_epoch = program.steps_per_epoch
  diverged_epochs = [
    int(s) // steps_per_epoch + 1 if s >= 0 else None for s in program.diverged_steps(state)
  ]
  summary = workdirs.summarize(
    config, workdirs.read_metrics(workdir), diverged_epochs, parts.select_metric
  )
  if jax.process_index() == 0:
    workdirs.write_json(os.path.join(workdir, workdirs.SUMMARY_FILE), summary)
  if diverged.all():
    raise DivergedError(
      f"All {len(diverged)} members diverged (their training loss became non-finite, at "
      f"epochs {diverged_epochs}); see {workdir}/metrics.jsonl. Lower the learning rates, or "
      "check that the model's functions are finite on every input the network meets."
    )
  return summary


def restore(parts: Parts, workdir: str) -> tuple[Members, TrainState]:
  """The members and stacked state of the newest readable checkpoint of ``parts``' run in
  ``workdir``.

  Args:
    parts: the run's parts (`gelujax.tasks.build` of the task its config.json records,
      `gelujax.tasks.read_task`, and its data); the state's shapes come from them.
    workdir: a run's directory.

  Returns:
    The members, and the state of the M members, replicated on every device.

  Raises:
    ValueError: the workdir holds no run, another run than ``parts`` describe (as `fit`
      would refuse it), or no readable checkpoint.
  """
  config = workdirs.read_config(workdir)
  if config is None:
    raise ValueError(f"Workdir {workdir} holds no run: it has no config.json and no checkpoint.")
  members = Members.from_json(config["members"])
  workdirs.check_same_run(config, workdirs.make_config(parts.record, members), workdir)
  program = make_program(parts, make_mesh(len(members)), len(members))
  checkpointer = checkpoints.Checkpointer(workdir, config=config)
  restored = checkpointer.restore_latest(program.abstract_state())
  checkpointer.close()
  if restored is None:
    raise ValueError(f"Workdir {workdir} holds no readable checkpoint under checkpoints/.")
  return members, restored.state


def evaluate_members(
  parts: Parts, state: TrainState, split: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
  """Each member's mean metrics over ``split`` (e.g. {"loss": [M], "error": [M]}) for a state of
  M members such as `restore` returns, computed by ``parts``' model and objective (means over
  what the objective counts: `gelujax.objectives.Objective.count`)."""
  num = len(state.diverged_step)
  program = make_program(parts, make_mesh(num), num)
  device_split = program.put_eval_split(split)
  size = parts.objective.count(split)
  return program.mean_metrics(program.pad(state), device_split, size)


def predict_members(parts: Parts, state: TrainState, split: Mapping[str, np.ndarray]) -> np.ndarray:
  """Each member's model outputs (logits) on every example of ``split``, for a state of M
  members such as `restore` returns: ``[M, N, ...]`` float32 on the host, N the split's
  examples (a token model's ``[M, N, tokens, classes]``, its padding's outputs included: the
  objective says which count, e.g. targets >= 0).

  Computed as `evaluate_members` computes the metrics: by ``parts``' model in its compute
  dtype, dropout off, in the program's evaluation batches, on the same mesh; the outputs come
  back in float32 whatever the dtype (`gelujax.engine.step.apply_model`). Another program
  (grid size, layout, strategy) gives the same outputs to float32 rounding.
  """
  num = len(state.diverged_step)
  program = make_program(parts, make_mesh(num), num)
  device_split = program.put_eval_split(split)
  return program.outputs(program.pad(state), device_split, len(split["targets"]))
