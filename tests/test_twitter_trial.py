"""scripts/twitter_trial.py: each round's choice by its rule, from trial workdirs written here."""

import importlib.util
from pathlib import Path

import pytest
from fake_workdirs import member, write_workdir

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
  "twitter_trial", ROOT / "scripts" / "twitter_trial.py"
)
twitter_trial = importlib.util.module_from_spec(spec)
spec.loader.exec_module(twitter_trial)


def grid(folder, name, errors):
  """A trial run: lr -> the 5 seeds' validation errors (constant over 3 epochs)."""
  members = [
    member(seed, lr, validation_error=[e] * 3, validation_loss=[e] * 3, train_loss=[e] * 3)
    for lr, values in errors.items()
    for seed, e in enumerate(values)
  ]
  write_workdir(
    folder / name, members, activation="gelu_tanh", task="twitter_pos", dataset="twitter_pos",
    select_metric="validation_error",
  )  # fmt: skip


def test_each_round_chooses_by_its_rule(tmp_path, capsys):
  grid(tmp_path, "frozen_random", {1e-3: [0.36] * 5, 1e-4: [0.37] * 5})
  # Round 1 compares selected lrs (1e-3: 0.31); round 2 compares lr 1e-3 alone, where a
  # spelling candidate whose other lr would be better still loses to the lower median at 1e-3.
  grid(tmp_path, "trainable_random", {1e-3: [0.31, 0.30, 0.31, 0.32, 0.30], 1e-4: [0.35] * 5})
  grid(tmp_path, "spelling", {1e-3: [0.22, 0.21, 0.25, 0.20, 0.22]})
  grid(tmp_path, "spelling_word_dropout", {1e-3: [0.20, 0.21, 0.19, 0.23, 0.22]})
  twitter_trial.main(tmp_path)
  out = capsys.readouterr().out
  assert "Round 1: frozen or trainable random embeddings: chosen trainable_random" in out
  assert "substitutes that read a word's spelling: chosen spelling_word_dropout" in out
  text = (tmp_path / "README.md").read_text()
  assert (
    "**Chosen: spelling_word_dropout** (21.00%, against 31.00% for trainable_random, "
    "22.00% for spelling)." in text
  )
  # A tie keeps the earlier, simpler candidate.
  grid(tmp_path, "spelling_word_dropout", {1e-3: [0.22, 0.21, 0.25, 0.20, 0.22]})
  twitter_trial.main(tmp_path)
  assert "a word's spelling: chosen spelling (--task=" in capsys.readouterr().out


def test_an_unfinished_trial_run_is_a_clear_error(tmp_path):
  grid(tmp_path, "frozen_random", {1e-3: [0.36] * 5})
  with pytest.raises(SystemExit, match=r"trainable_random is not a finished trial run"):
    twitter_trial.main(tmp_path)
