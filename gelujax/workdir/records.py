"""A run's records, metrics.jsonl: read, written, and made whole on resume.

`read_metrics` tolerates a last line cut short; `metrics_lines` is the one text of records. A
resume makes metrics.jsonl hold exactly the records up to the restored checkpoint, which carries
them (`resume_metrics`): whatever was cut, deleted or changed before it is rewritten (the file
kept as ``metrics.jsonl.damaged``), so the run ends byte-equal to an uninterrupted one.
`check_resumable` refuses a workdir whose results no checkpoint can resume.
"""

from __future__ import annotations

import json
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
