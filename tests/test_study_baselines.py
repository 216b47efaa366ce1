"""Tests for gelujax.study.baselines: the out-of-vocabulary counts and the most-frequent-tag
lookup of Twitter POS against counts made by hand, and the result's baselines.json."""

import dataclasses
import hashlib
import json

import pytest

from gelujax import data
from gelujax.study import baselines, runs
from gelujax.study.stats import Stats

# Train: "go" is tagged V then N (a tie: V, seen first), "home" N then V once lowercased (a tie:
# N, seen first), and the tags V and N are tied 3 to 3 over the split (V, seen first: a rule by
# the authors' tag order, or by name, would pick N).
TRAIN = "Go\tV\ngo\tV\ngo\tN\nLOL\t!\n\nlol\t!\nHome\tN\n@x\t@\nhome\tV\nok\tN\n"
DEV = "GO\tV\nhome\tN\n\nok\tV\n"
TEST = "Lol\t!\nHOME\tN\nzzz\tN\n@x\t@\n\ngo\tN\n"
# By hand. Cased table: Go V, go V (tie), LOL !, lol !, Home N, @x @, home V, ok N; 8 types.
# Lowercased table: go V (V, V, N), lol !, home N (tie), @x @, ok N; 5 types. Unknown: V.
# dev, cased: GO unknown -> V (right), home -> V (wrong), ok -> N (wrong).
# dev, lowercased: go -> V (right), home -> N (right), ok -> N (wrong).
# test, cased: Lol, HOME, zzz unknown -> V (all wrong), @x right, go -> V (wrong).
# test, lowercased: lol ! (right), home N (right), zzz unknown -> V (wrong), @x right, go V (wrong).
BY_HAND = {
  "train": {
    "tokens": 9,
    "types": {"cased": 8, "lowercased": 5},
    "most_frequent_tag": "V",
    "most_frequent_tag_tokens": 3,
  },
  "validation": {
    "tokens": 3,
    "out_of_vocabulary": {"cased": 1, "lowercased": 0},
    "lookup_errors": {"cased": 2, "lowercased": 1},
  },
  "test": {
    "tokens": 5,
    "out_of_vocabulary": {"cased": 3, "lowercased": 1},
    "lookup_errors": {"cased": 4, "lowercased": 2},
  },
}


def write_ark(folder):
  folder.mkdir(parents=True, exist_ok=True)
  for split, text in (("train", TRAIN), ("dev", DEV), ("test", TEST)):
    (folder / f"oct27.{split}").write_text(text, encoding="utf-8")
  return folder


def record_of(folder, source=None):
  """The record the loader keeps of the files in ``folder``, its sha256 computed here."""
  sha256 = {
    f"oct27.{s}": hashlib.sha256((folder / f"oct27.{s}").read_bytes()).hexdigest()
    for s in ("train", "dev", "test")
  }
  paths = ", ".join(str(folder / f"oct27.{s}") for s in ("train", "dev", "test"))
  return {"dataset": "twitter_pos", "source": source or f"ARK files {paths}", "sha256": sha256}


def test_lookup_baseline_matches_the_counts_made_by_hand(tmp_path):
  splits = data.load("twitter_pos", write_ark(tmp_path))
  assert splits.info["words"]["test"] == ["Lol", "HOME", "zzz", "@x", "go"]
  assert baselines.lookup_baseline(splits) == BY_HAND


def test_most_frequent_breaks_ties_by_the_first_seen():
  assert baselines.most_frequent(["N", "V", "V", "N"]) == ("N", 2)
  assert baselines.most_frequent(["V", "N", "N", "V", "A"]) == ("V", 2)
  assert baselines.lookup_table(["a", "b", "a", "a", "b"], [3, 1, 2, 2, 1]) == {"a": 2, "b": 1}


def stats(values, seeds):
  """A row's statistics of ``values`` over ``seeds``, as `runs.member_stats` makes them."""
  return runs.SeedStats(**dataclasses.asdict(Stats.of(values)), seeds=tuple(seeds))


def test_compare_words_by_the_median_the_share_and_every_seed():
  lookup = {"test": {"tokens": 10, "lookup_errors": {"cased": 5, "lowercased": 4}}}
  shown = [
    # Cased 0.5: below by 0.1 = 20% of it, every seed below: beats. Lowercased 0.4: equal.
    ("a", 1e-3, "evaluation seeds", stats([0.39, 0.4, 0.41], [1, 2, 3])),
    # Below 0.5 by 0.14 (28%) and below 0.4 by 0.04 (10%), but one seed above both: barely.
    ("b", 1e-3, "evaluation seeds", stats([0.3, 0.36, 0.6], [1, 2, 3])),
    # Below 0.5 by 0.045 (9%), every seed below: barely.
    ("c", 1e-4, "selection seeds", stats([0.455, 0.455], [0, 1])),
  ]
  compared = baselines.compare(lookup, shown)
  words = [(c["run"], c["against"]["cased"]["word"], c["against"]["lowercased"]["word"])
           for c in compared]  # fmt: skip
  assert words == [
    ("a", "beats", "does not beat"),
    ("b", "barely beats", "barely beats"),
    ("c", "barely beats", "does not beat"),
  ]
  a = compared[0]["against"]["cased"]
  assert a["lookup_error"] == 0.5 and a["below"] == pytest.approx(0.1)
  assert a["share"] == pytest.approx(0.2) and a["seeds_below"] == 3
  assert compared[1]["against"]["cased"]["seeds_below"] == 2
  assert compared[2]["median"] == 0.455 and compared[2]["which"] == "selection seeds"


def test_the_result_file_is_computed_where_the_data_are_and_read_where_they_are_not(tmp_path):
  folder = write_ark(tmp_path / "data" / "twpos")
  out = tmp_path / "results" / "twitter_pos" / "twitter_pos"
  out.mkdir(parents=True)
  # The runs recorded their files relative to the repository root they were trained from.
  record = record_of(folder, "ARK files ../data/twpos/oct27.train, ../data/twpos/oct27.dev, "
                             "../data/twpos/oct27.test")  # fmt: skip
  root = tmp_path / "repo"
  root.mkdir()
  found = baselines.result_baselines("twitter_pos", out, [record, record], root)
  assert found["lookup"] == BY_HAND
  assert found["data"]["sha256"] == record["sha256"]
  assert json.loads((out / baselines.BASELINES_FILE).read_text()) == found
  # No data anywhere: the file is read.
  for path in folder.iterdir():
    path.unlink()
  assert baselines.result_baselines("twitter_pos", out, [record], root) == found
  assert baselines.result_baselines("mnist", out, [record], root) is None
  # A file of other data, runs of different data, or nothing at all: no baseline, and why.
  other = {**record, "sha256": {**record["sha256"], "oct27.test": "0" * 64}}
  why = baselines.result_baselines("twitter_pos", out, [other], root)
  assert why.startswith("not computed: baselines.json holds other data files")
  why = baselines.result_baselines("twitter_pos", out, [record, other], root)
  assert why == "not computed: the runs were trained on data files of different sha256"
  assert baselines.result_baselines("twitter_pos", out, [None], root).startswith(
    "not computed: the runs' config.json files do not all record"
  )
  (out / baselines.BASELINES_FILE).unlink()
  why = baselines.result_baselines("twitter_pos", out, [record], root)
  assert why.startswith("not computed: the data files the runs were trained on are not found")


def test_data_of_other_files_than_the_runs_are_not_used(tmp_path):
  folder = write_ark(tmp_path / "twpos")
  record = record_of(folder)
  (folder / "oct27.test").write_text(TEST + "\nzzz\tN\n", encoding="utf-8")
  out = tmp_path / "out"
  out.mkdir()
  why = baselines.result_baselines("twitter_pos", out, [record], tmp_path)
  assert why.startswith("not computed: the data files the runs were trained on are not found")
  assert not (out / baselines.BASELINES_FILE).exists()


def test_the_file_is_kept_where_only_the_folder_it_names_differs(tmp_path):
  folder = write_ark(tmp_path / "twpos")
  out = tmp_path / "out"
  out.mkdir()
  found = baselines.result_baselines("twitter_pos", out, [record_of(folder)], tmp_path)
  kept = {**found, "data": {**found["data"], "source": "ARK files elsewhere/oct27.train"}}
  (out / baselines.BASELINES_FILE).write_text(json.dumps(kept))
  assert baselines.result_baselines("twitter_pos", out, [record_of(folder)], tmp_path) == kept
