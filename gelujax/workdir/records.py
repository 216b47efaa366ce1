"""A run's records, metrics.jsonl: read, written, made whole on resume, and summarized.

`read_metrics` tolerates a last line cut short; `metrics_lines` is the one text of records. A
resume makes metrics.jsonl hold exactly the records up to the restored checkpoint, which carries
them (`resume_metrics`): whatever was cut, deleted or changed before it is rewritten (the file
kept as ``metrics.jsonl.damaged``), so the run ends byte-equal to an uninterrupted one.
`check_resumable` refuses a workdir whose results no checkpoint can resume. `summarize` is the
summary.json a run writes at its end, from its records; `derive_summary` gives it again from a
finished run's config.json and metrics.jsonl alone, which must hold every evaluation the run made
(`check_finished`): the records are what a result is computed from, never summary.json's copy.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from gelujax.workdir.files import (
  CHECKPOINT_DIR,
  METRICS_FILE,
  SUMMARY_FILE,
  WorkdirError,
  has_content,
  keep_aside,
  replace_atomically,
  trained_epochs,
)

# Keys of a metrics.jsonl record that describe the evaluation, not a measured value.
RECORD_KEYS = ("member", "seed", "learning_rate", "epoch", "step", "diverged")


def read_metrics(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """The records of ``workdir/metrics.jsonl`` in file order ([] when there is none).

  A last line that is cut short (the append of a run killed or out of disk space mid-write) is
  left out: the run rewrites it when resumed. Any other line that is not a JSON record raises
  a ValueError naming the file and the line.
  """
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path, "rb") as f:
    data = f.read()
  lines = data.split(b"\n")
  records = []
  for number, line in enumerate(lines, 1):
    if not line.strip(b"\0 \t\r"):
      continue
    try:
      record = json.loads(line)
      if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
      if number == len(lines):  # Not ended by a newline: an append that was cut short.
        break
      raise ValueError(
        f"{path}, line {number}: not a JSON record ({e}); the file is left as it is: fix or "
        "remove that line, or put back a good copy."
      ) from None
    records.append(record)
  return records


def metrics_lines(records: Iterable[dict[str, Any]]) -> str:
  """The text of metrics.jsonl for ``records``: one JSON object a line, as the run appends them
  (a record read back with `read_metrics` gives the same line, byte for byte)."""
  return "".join(json.dumps(record, allow_nan=False) + "\n" for record in records)


def write_metrics(workdir: str, records: Iterable[dict[str, Any]]) -> None:
  """Replaces metrics.jsonl with ``records``, atomically."""
  replace_atomically(os.path.join(workdir, METRICS_FILE), metrics_lines(records))


def check_resumable(workdir: str) -> None:
  """Refuses a workdir that holds results but no finished checkpoint to resume them from.

  Training again from epoch 0 would overwrite the results, which gelujax never does by itself.
  A run saves a checkpoint after its first epoch, so records of epoch 1 at most, without a
  checkpoint, are those of a run stopped before that save: a restart writes them again.
  """
  results = unresumable_results(workdir)
  if results:
    raise WorkdirError(
      f"Workdir {workdir} holds the run's results ({' and '.join(results)}) but no checkpoint "
      f"to resume them from ({os.path.join(workdir, CHECKPOINT_DIR)} is missing or "
      "holds no finished checkpoint). Training again from epoch 0 would overwrite them, which "
      "gelujax never does by itself: put back the run's checkpoints to resume it, or pass another "
      "`workdir` to train the grid again."
    )


def unresumable_results(workdir: str) -> list[str]:
  """The results of ``workdir`` that no finished checkpoint can resume (`check_resumable`),
  named for a message: ``["metrics.jsonl up to epoch 3", "summary.json"]``; [] when none."""
  if trained_epochs(workdir):
    return []
  results = [SUMMARY_FILE] if has_content(workdir, SUMMARY_FILE) else []
  last = max((epoch_of(r) for r in read_metrics(workdir)), default=0.0)
  if last > 1:
    results.insert(0, f"{METRICS_FILE} up to epoch {last:g}")
  return results


def epoch_of(record: Any) -> float:
  """A metrics record's epoch (+inf when it has none: a record no run wrote)."""
  epoch = record.get("epoch") if isinstance(record, dict) else None
  return float(epoch) if isinstance(epoch, int | float) else float("inf")


def resume_metrics(
  workdir: str,
  epoch: int,
  recorded: Sequence[dict[str, Any]] | None,
  evaluations: Sequence[tuple[int, float, int]],
) -> list[dict[str, Any]]:
  """Makes metrics.jsonl hold exactly the run's records up to ``epoch``, that of the checkpoint a
  run resumes from, and returns them.

  The resumed run writes the records after ``epoch`` again: those (and a last line cut short)
  are dropped. The records up to ``epoch`` are those its checkpoint holds (``recorded``); where
  metrics.jsonl lost, cut or changed any of them, it is kept as ``metrics.jsonl.damaged`` and
  rewritten from them, with one line on stderr. A checkpoint written before checkpoints held
  the records (``recorded`` None) restores none: metrics.jsonl must then hold one record for
  each of ``evaluations``, the ``(member, epoch, step)`` of every record up to ``epoch`` in
  order.

  Raises:
    WorkdirError: ``recorded`` is None and metrics.jsonl lacks (or repeats) a record.
  """
  path = os.path.join(workdir, METRICS_FILE)
  if recorded is None:
    kept = [r for r in read_metrics(workdir) if epoch_of(r) <= epoch]
    found = [(r.get("member"), r["epoch"], r.get("step")) for r in kept]
    if found != list(evaluations):
      detail = _first_difference([_describe_key(k) for k in found], evaluations)
      raise WorkdirError(
        f"{path} does not hold the run's records up to epoch {epoch} ({detail}), and its "
        f"checkpoint of epoch {epoch}, written by an older gelujax, holds none to restore them "
        "from. The files are left as they are: put back a good copy of metrics.jsonl, or pass "
        "another `workdir` to train the grid again."
      )
    write_metrics(workdir, kept)
    return kept
  expected = metrics_lines(recorded).encode()
  data = _read_bytes(path)
  problem = _metrics_problem(data, expected, epoch, evaluations)
  if problem is not None:
    kept = keep_aside(path) if data is not None else None
    print(
      f"{path} {problem}; rewritten from the checkpoint of epoch {epoch}, which holds its "
      f"records{f', and the previous file kept as {kept}' if kept else ''}.",
      file=sys.stderr,
    )
  write_metrics(workdir, recorded)
  return list(recorded)


def _read_bytes(path: str) -> bytes | None:
  try:
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def _describe_key(key: tuple[Any, Any, Any]) -> str:
  member, epoch, _ = key
  return f"the record of member {member} at epoch {epoch:g}"


def _first_difference(found: Sequence[str], evaluations: Sequence[tuple[int, float, int]]) -> str:
  """Where records described by ``found`` first depart from ``evaluations``'."""
  for i, key in enumerate(evaluations):
    expected = _describe_key(key)
    if i >= len(found):
      return f"it ends before {expected}, record {i + 1}"
    if found[i] != expected:
      return f"record {i + 1} is {found[i]}, not {expected}"
  return f"record {len(evaluations) + 1} is {found[len(evaluations)]}, one more than the run wrote"


def _metrics_problem(
  data: bytes | None, expected: bytes, epoch: int, evaluations: Sequence[tuple[int, float, int]]
) -> str | None:
  """What is wrong with metrics.jsonl (``data``) for a resume from ``epoch``, whose records
  are ``expected``; None when it starts with them and holds nothing after them but records of
  later epochs and a last line cut short (what a run stopped after the checkpoint leaves)."""
  if data is None:
    return "was missing" if expected else None
  lines = data.split(b"\n")
  if not data.startswith(expected):
    for i, line in enumerate(expected.split(b"\n")[:-1]):
      described = _describe_key(evaluations[i]) if i < len(evaluations) else f"record {i + 1}"
      if i >= len(lines) - 1:  # The last element of a split is never a whole line.
        return f"ends before {described}, line {i + 1}"
      if lines[i] != line:
        return f"does not hold {described} on line {i + 1}, as the run wrote it"
  after = lines[expected.count(b"\n") :]
  for i, line in enumerate(after):
    number = expected.count(b"\n") + i + 1
    if not line.strip(b"\0 \t\r") or i == len(after) - 1:
      continue  # Blank, or the last line: not ended by a newline, an append cut short.
    try:
      record = json.loads(line)
    except ValueError:
      return f"has a line {number} that is not a JSON record"
    if epoch_of(record) <= epoch:
      return f"has a record of epoch {epoch} or before on line {number}, after the run's records"
  return None


def summarize(
  config: dict[str, Any],
  records: Sequence[dict[str, Any]],
  diverged_epochs: Sequence[int | None],
  select_metric: str,
) -> dict[str, Any]:
  """The summary.json object from a run's config and all its metrics records.

  The best evaluation is the one with the lowest finite ``select_metric``; a run without a
  validation split selects on the matching test metric instead.
  """
  summary_members = []
  for i, member in enumerate(config["members"]):
    own = [r for r in records if r["member"] == i]
    metric = select_metric
    if own and metric not in own[0] and metric.startswith("validation_"):
      metric = "test_" + metric.removeprefix("validation_")
    candidates = [r for r in own if r.get(metric) is not None]
    best = min(candidates, key=lambda r: r[metric]) if candidates else None
    summary_members.append(
      {
        "seed": member["seed"],
        "learning_rate": member["learning_rate"],
        "diverged": diverged_epochs[i] is not None,
        "diverged_epoch": diverged_epochs[i],
        "best_epoch": best["epoch"] if best else None,
        "best": _values(best) if best else {},
        "final": _values(own[-1]) if own else {},
      }
    )
  return {
    "task": config["task"],
    "dataset": config["dataset"],
    "activation": config["activation"],
    "epochs": config["spec"]["epochs"],
    "members": summary_members,
  }


def _values(record: dict[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in record.items() if k not in RECORD_KEYS}


def derive_summary(
  workdir: str | os.PathLike, config: dict[str, Any], records: Sequence[dict[str, Any]]
) -> dict[str, Any]:
  """The summary.json of a finished run, from its config.json and its records (``records``, read
  from ``workdir``'s metrics.jsonl) alone: what the run wrote at its end, where neither file
  changed since. A member's divergence epoch is the epoch of its first record marked diverged
  (the evaluation after its first non-finite step, in the same epoch).

  Raises:
    WorkdirError: the records are not every evaluation the run made (`check_finished`).
  """
  check_finished(workdir, config, records)
  diverged: list[int | None] = [None] * len(config["members"])
  for record in records:
    if record.get("diverged") is True and diverged[record["member"]] is None:
      diverged[record["member"]] = math.ceil(record["epoch"])
  select_metric = config["spec"].get("select_metric", "validation_loss")
  return summarize(config, records, diverged, select_metric)


def check_finished(
  workdir: str | os.PathLike, config: dict[str, Any], records: Sequence[dict[str, Any]]
) -> None:
  """Refuses the records of a finished run (``records``, read from ``workdir``'s metrics.jsonl)
  unless they are every evaluation it made: for each member of its config.json, ``evals_per_epoch``
  an epoch for each of its ``epochs``, in order, each once, marked diverged from the first so
  marked on. A run stops early only where every member has diverged: it then made as many
  evaluations of each, the last of each marked diverged.

  Raises:
    WorkdirError: naming the file, the first member whose evaluations are not those, and what
      they would be.
  """
  path = os.path.join(workdir, METRICS_FILE)
  members, spec = config["members"], config["spec"]
  epochs, per_epoch = int(spec["epochs"]), int(spec.get("evals_per_epoch", 1))
  own: list[list[dict[str, Any]]] = [[] for _ in members]
  for record in records:
    i = record.get("member")
    key = (record.get("seed"), record.get("learning_rate"))
    known = isinstance(i, int) and 0 <= i < len(members)
    if not known or key != (members[i]["seed"], members[i]["learning_rate"]):
      raise _not_finished(
        path,
        f"holds a record of member {i} (seed {key[0]}, lr {key[1]}) at epoch "
        f"{epoch_of(record):g}, which is not a member of the run's config.json (its "
        f"{len(members)} members are {_describe_members(members)})",
      )
    own[i].append(record)
  made = epochs * per_epoch
  how = (
    f"{per_epoch} an epoch for the {epochs} epochs its config.json sets; fewer only where every "
    "member had diverged, which stops a run"
  )
  counts = {len(found) for found in own}
  stopped = len(counts) == 1 and 0 < (count := next(iter(counts))) < made
  if stopped and count % per_epoch == 0 and all(found[-1].get("diverged") is True for found in own):
    made = count
    how = (
      f"{per_epoch} an epoch for {made // per_epoch} of the {epochs} epochs its config.json "
      "sets: every member had diverged by then, which stops a run"
    )
  if not records:
    raise _not_finished(
      path,
      f"holds no record, where the finished run made {made} evaluations of each of its "
      f"{len(members)} members ({how})",
    )
  for i, found in enumerate(own):
    who = f"member {i} (seed {members[i]['seed']}, lr {members[i]['learning_rate']:g})"
    if len(found) != made:
      last = f", up to epoch {epoch_of(found[-1]):g}" if found else ""
      raise _not_finished(
        path,
        f"holds {len(found)} evaluations of {who}{last}, where the finished run made {made} of "
        f"each member ({how})",
      )
    previous, diverged = 0.0, None
    for j, record in enumerate(found, 1):
      epoch = epoch_of(record)
      whole = j % per_epoch == 0
      if not previous < epoch or (whole and epoch != j // per_epoch):
        where = f"at epoch {j // per_epoch}" if whole else f"after epoch {previous:g}"
        raise _not_finished(
          path, f"holds evaluation {j} of {who} at epoch {epoch:g}, where the run made it {where}"
        )
      if diverged is not None and record.get("diverged") is not True:
        raise _not_finished(
          path,
          f"marks {who} diverged at epoch {diverged:g} but not at epoch {epoch:g}, where the "
          "run marks a member diverged at every evaluation after its first non-finite step",
        )
      if diverged is None and record.get("diverged") is True:
        diverged = epoch
      previous = epoch


def _describe_members(members: Sequence[dict[str, Any]]) -> str:
  shown = ", ".join(f"seed {m['seed']} at lr {m['learning_rate']:g}" for m in members[:4])
  return shown + (f" and {len(members) - 4} more" if len(members) > 4 else "")


def _not_finished(path: str, problem: str) -> WorkdirError:
  return WorkdirError(
    f"{path} {problem}. The run's summary.json says it finished, so records were lost, cut or "
    "changed after it wrote them; no result is computed from them, nor from summary.json, whose "
    "values come from them. Put back the metrics.jsonl the run wrote (a committed result's: "
    "`git checkout` it), let a run still training or being extended finish, or train it again "
    "in another `out`."
  )
