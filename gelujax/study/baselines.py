"""What a task's data give without training, beside what its runs reached: for Twitter POS
(§3.3), how many validation and test tokens lie outside the training split's words, and the
error of a per-word most-frequent-tag lookup built from the training split.

Without pretrained embeddings the vocabulary is the training split's word types
(`gelujax.data`), so a validation or test word the training split does not hold is read as
``UUUNKKK``, a vector no training token reaches. The lookup tags each token with the tag its
word bears most often in the training split (ties: the tag seen first there, in file order);
a word the training split does not hold gets the training split's most frequent tag (ties
alike). Both are computed as the files spell the words (*cased*) and with every word lowercased
(``str.lower``, in the training split too).

:func:`lookup_baseline` computes them from the splits :func:`gelujax.data.load` returns. The
data are not committed, so a result keeps them in ``<out>/baselines.json`` with the data's
record (the files' sha256 as the loader records them): :func:`result_baselines` recomputes the
file whenever a result is written where the files its runs were trained on are found (the
folder their config.json names, else the loader's own search, never the network), and reads it
where they are not. :func:`compare` sets each run's test error against the lookup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.study.runs import RunRow, SeedStats
from gelujax.workdir import read_json, write_json

BASELINES_FILE = "baselines.json"
# The tasks with a baseline of their data, and the data set it is computed from.
DATASETS = {"twitter_pos": "twitter_pos"}
SPLITS = ("validation", "test")
CASES: dict[str, Callable[[str], str]] = {"cased": lambda w: w, "lowercased": str.lower}
# The runs' metric set against the lookup's test error.
METRIC = "best.test_error"
METRIC_WORDS = "test error at the best-validation epoch"
# A run beats the lookup when its median is below the lookup's error by at least this share of
# it and every seed lies below it; a median below it otherwise barely beats it.
BEATS_SHARE = 0.1
BEATS, BARELY, NOT_BELOW = "beats", "barely beats", "does not beat"


def most_frequent(values: Sequence[Any]) -> tuple[Any, int]:
  """``(value, count)`` of the most frequent of ``values``; ties: the one seen first."""
  counts: dict[Any, int] = {}
  for v in values:
    counts[v] = counts.get(v, 0) + 1
  # dicts keep the order of first insertion, and max returns the first of equal maxima.
  return max(counts.items(), key=lambda item: item[1])


def lookup_table(words: Sequence[str], tags: Sequence[int]) -> dict[str, int]:
  """Each word's most frequent tag (ties: the tag seen first with that word)."""
  by_word: dict[str, list[int]] = {}
  for word, tag in zip(words, tags, strict=True):
    by_word.setdefault(word, []).append(tag)
  return {word: most_frequent(found)[0] for word, found in by_word.items()}


def lookup_baseline(splits: Any) -> dict[str, Any]:
  """The out-of-vocabulary counts and the lookup's errors, from Twitter POS splits as
  :func:`gelujax.data.load` returns them (``info["words"]`` and each split's targets).

  Returns:
    ``{"train": {"tokens", "types": {case: n}, "most_frequent_tag", "most_frequent_tag_tokens"},
    <split>: {"tokens", "out_of_vocabulary": {case: n}, "lookup_errors": {case: n}}}`` for the
    validation and test splits, each case ``"cased"`` and ``"lowercased"``.
  """
  words, names = splits.info["words"], splits.info["tags"]
  tags = {k: [int(t) for t in splits[k]["targets"]] for k in ("train", *SPLITS)}
  for k, found in tags.items():
    if len(words[k]) != len(found):
      raise ValueError(f"The {k} split has {len(words[k])} words but {len(found)} targets.")
  fallback, count = most_frequent(tags["train"])
  result: dict[str, Any] = {
    "train": {
      "tokens": len(tags["train"]),
      "types": {},
      "most_frequent_tag": names[fallback],
      "most_frequent_tag_tokens": count,
    },
    **{k: {"tokens": len(tags[k]), "out_of_vocabulary": {}, "lookup_errors": {}} for k in SPLITS},
  }
  for case, fold in CASES.items():
    table = lookup_table([fold(w) for w in words["train"]], tags["train"])
    result["train"]["types"][case] = len(table)
    for k in SPLITS:
      folded = [fold(w) for w in words[k]]
      result[k]["out_of_vocabulary"][case] = sum(w not in table for w in folded)
      result[k]["lookup_errors"][case] = sum(
        table.get(w, fallback) != t for w, t in zip(folded, tags[k], strict=True)
      )
  return result


def error_rate(lookup: Mapping[str, Any], split: str, case: str) -> float:
  """The lookup's error on ``split`` as a fraction of its tokens."""
  return lookup[split]["lookup_errors"][case] / lookup[split]["tokens"]


# ------------------------------------------------------------------------- the result's file


def shared_record(records: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | str:
  """The data record the runs share (the first run's, their files' sha256 all equal), or why
  there is none."""
  if not records or any(not r or not r.get("sha256") for r in records):
    return "the runs' config.json files do not all record the sha256 of their data files"
  if any(r["sha256"] != records[0]["sha256"] for r in records):
    return "the runs were trained on data files of different sha256"
  return dict(records[0])


def recorded_folders(record: Mapping[str, Any], root: Path) -> list[Path]:
  """The folders a record's source names its files in (``"ARK files a/oct27.train, ..."``),
  a relative one under ``root`` and then under the working directory (where it was trained),
  each relative to the working directory (as the runs' records name them, run from ``root``)."""
  source = record.get("source", "")
  head = "ARK files "
  if not source.startswith(head):
    return []
  folders = dict.fromkeys(Path(p).parent for p in source.removeprefix(head).split(", "))
  found: dict[Path, Path] = {}
  for folder in folders:
    for where in (root / folder, Path.cwd() / folder):
      found.setdefault(where.resolve(), Path(os.path.relpath(where.resolve())))
  return list(found.values())


def find_data(dataset: str, record: Mapping[str, Any], root: Path) -> Any | None:
  """The splits of ``dataset`` whose files have the record's sha256, from the folders the
  record names, else from :func:`gelujax.data.load`'s own search without the network; None
  where neither has them."""
  from gelujax import data  # Imported here: reading results needs no data set.

  for folder in [*recorded_folders(record, root), None]:
    if folder is not None and not folder.is_dir():
      continue
    try:
      splits = data.load(dataset, folder, network=False)
    except ValueError:  # Not there, or not readable: look on.
      continue
    if splits.info["record"]["sha256"] == record["sha256"]:
      return splits
  return None


def result_baselines(
  task: str, out: Path, records: Sequence[Mapping[str, Any] | None], root: Path
) -> dict[str, Any] | str | None:
  """The content of ``out/baselines.json`` for a result of ``task`` (None: the task has no
  baseline), or why there is none.

  Where the data files the runs were trained on are found, the baselines are computed from
  them and the file is written (kept as it is where only the folder it names differs); else the
  file is read, and used where its files' sha256 are the runs'.
  """
  dataset = DATASETS.get(task)
  if dataset is None:
    return None
  record = shared_record(records)
  if isinstance(record, str):
    return f"not computed: {record}"
  path = out / BASELINES_FILE
  kept = read_json(path) if path.exists() else None
  splits = find_data(dataset, record, root)
  if splits is not None:
    found = {"data": splits.info["record"], "lookup": lookup_baseline(splits)}
    if kept is None or _without_source(kept) != _without_source(found):
      write_json(path, found)
      kept = found
  if kept is None:
    return (
      "not computed: the data files the runs were trained on are not found here (neither in the "
      "folder their config.json names nor by the loader's search) and no baselines.json holds "
      "them; render where they are"
    )
  if kept["data"]["sha256"] != record["sha256"]:
    return (
      f"not computed: {BASELINES_FILE} holds other data files than the runs were trained on; "
      "render where the runs' files are"
    )
  return kept


def _without_source(baselines: Mapping[str, Any]) -> dict[str, Any]:
  return {**baselines, "data": {k: v for k, v in baselines["data"].items() if k != "source"}}


# ---------------------------------------------------------------------- runs against the lookup


def compare(
  lookup: Mapping[str, Any], shown: Sequence[tuple[str, float, str, SeedStats]]
) -> list[dict[str, Any]]:
  """Each run's test error (``shown``: run, lr, which seeds, and its ``METRIC`` statistics as a
  run's row holds them) against the lookup's test error, cased and
  lowercased: the median's distance from it (``below``: the lookup's error minus the median, in
  the metric's units), its share of the lookup's error, the seeds below it and the verdict
  word (:data:`BEATS`, :data:`BARELY`, :data:`NOT_BELOW`)."""
  compared = []
  for run, lr, which, statistics in shown:
    values = np.asarray(statistics.values, float)
    median = float(np.median(values))
    against = {}
    for case in CASES:
      error = error_rate(lookup, "test", case)
      below = error - median
      seeds_below = int(np.sum(values < error))
      if below <= 0:
        word = NOT_BELOW
      elif below >= BEATS_SHARE * error and seeds_below == len(values):
        word = BEATS
      else:
        word = BARELY
      against[case] = {
        "lookup_error": error,
        "below": below,
        "share": below / error,
        "seeds_below": seeds_below,
        "word": word,
      }
    compared.append(
      {
        "run": run,
        "learning_rate": lr,
        "which": which,
        "seeds": list(statistics.seeds),
        "median": median,
        "against": against,
      }
    )
  return compared


def shown_runs(
  evaluation_rows: Mapping[str, RunRow], rows: Sequence[RunRow]
) -> list[tuple[str, float, str, SeedStats]]:
  """The runs set against the lookup: every evaluation run at its lr, else (none trained) each
  selection grid at its selected lr."""
  shown = [
    (name, g.learning_rate, "evaluation seeds", g.metrics[METRIC])
    for name, row in evaluation_rows.items()
    for g in row.grid
    if g.values(METRIC)
  ]
  if shown:
    return shown
  return [
    (row.run, selected.learning_rate, "selection seeds", selected.metrics[METRIC])
    for row in rows
    if (selected := row.selected) and selected.values(METRIC)
  ]
