"""Tests for gelujax.study.overview: results/README.md's one table and the top-level README's
summary, from hand-made summaries and verdicts (the committed ones are checked against their
results' READMEs in tests/test_results.py)."""

from __future__ import annotations

import json

from gelujax.paper import PAPER, Design
from gelujax.study import analysis, overview, verdicts
from gelujax.study.verdicts import Evidence


def row(where, word, caveats="", claim="c", kind=overview.HYPOTHESIS):
  return {"kind": kind, "where": where, "claim": claim, "paper": "p", "ours": "o",
          "verdict": word, "word": word, "caveats": caveats}  # fmt: skip


def write(root, folder, summary):
  path = root / "results" / folder / "summary.json"
  path.parent.mkdir(parents=True)
  path.write_text(json.dumps(summary))


SETTINGS = {
  "task": "twitter_pos", "dataset": "twitter_pos", "spec": {"evals_per_epoch": 1},
  "activations": ["gelu_tanh", "relu"], "dropout_rates": [0.2], "learning_rates": [1e-3],
  "seeds": [0], "evaluation_seeds": [100], "epochs": 30,
}  # fmt: skip


def test_one_table_and_a_summary_that_counts_it(tmp_path):
  """A row per hypothesis of each result and per family of a study, the paper's first; two
  results of one figure named by their folders; a cell's '|' escaped; a result written before
  headline rows asks to be re-rendered; the summary counts each verdict and names the
  hypotheses, '*' where a verdict carries caveats, then the study's line."""
  write(tmp_path, "a/gelu_forms", {
    "study": "gelu_forms", "title": "The forms",
    "headline": [row("gelu_forms, forms: k, float32", "1 equivalent", kind="family")],
    "headline_summary": "The forms: 1 equivalent.",
  })  # fmt: skip
  write(tmp_path, "twitter_pos/twitter_pos", {
    "task": "twitter_pos", "settings": SETTINGS,
    "headline": [row("§3.3, primary 1", "confirmed", "still falls"),
                 row("§3.3, primary 2", "inconclusive", claim="a | b")],
  })  # fmt: skip
  write(tmp_path, "twitter_pos/spelling", {
    "task": "twitter_pos", "settings": SETTINGS,
    "headline": [row("§3.3, primary 1", "confirmed")],
  })  # fmt: skip
  write(tmp_path, "fashion_mnist/mnist_ae", {"task": "mnist_ae", "settings": SETTINGS})
  text = overview.results_readme(tmp_path)
  table = text.split("|---|---|---|---|---|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
  assert [line.split("](")[0] for line in table] == [
    "| [results/fashion_mnist/mnist_ae",  # the paper's order: Fig. 4 before §3.3
    "| [§3.3 (spelling) primary 1",
    "| [§3.3 (twitter_pos) primary 1",
    "| [§3.3 (twitter_pos) primary 2",
    "| [gelu_forms, forms: k, float32",
  ]
  assert table[0].endswith("| re-render it | – | – | – | – |")
  assert table[3].startswith(
    "| [§3.3 (twitter_pos) primary 2](twitter_pos/twitter_pos/README.md) | a \\| b | p | o | "
  )
  assert overview.summary_lines(tmp_path) == [
    "Confirmed: 2 of the paper's 3 pre-registered hypotheses, §3.3 (spelling) primary 1; §3.3 "
    "(twitter_pos) primary 1*.",
    "Inconclusive: 1 of the paper's 3 pre-registered hypotheses, §3.3 (twitter_pos) primary 2.",
    "The forms: 1 equivalent.",
  ]
  # Studies that lead the results: their rows and lines first, before the paper's, by their
  # place (the language model's 0 before the folder "a" of the one at 1).
  write(tmp_path, "b/vit_study", {
    "study": "vit_study", "title": "The transformer", overview.LEADS: 1,
    "headline": [row("vit_study, ranking: k", "1 supported", kind="family")],
    "headline_summary": "The transformer: 1 supported.",
  })  # fmt: skip
  write(tmp_path, "c/lm_study", {
    "study": "lm_study", "title": "The language model", overview.LEADS: 0,
    "headline": [row("lm_study, ranking: k", "pending", kind="family")],
    "headline_summary": "The language model: pending.",
  })  # fmt: skip
  table = overview.results_readme(tmp_path).split("|---|---|---|---|---|---|\n", 1)[1]
  assert table.startswith("| [lm_study, ranking: k](c/lm_study/README.md) |")
  assert table.splitlines()[1].startswith("| [vit_study, ranking: k](b/vit_study/README.md) |")
  assert overview.summary_lines(tmp_path)[:2] == [
    "The language model: pending.", "The transformer: 1 supported."
  ]  # fmt: skip
  assert overview.summary_lines(tmp_path)[2].startswith("Confirmed: 2 of the paper's 3")
  for name in ("b/vit_study", "c/lm_study"):
    (tmp_path / "results" / name / "summary.json").unlink()
  # The top-level README keeps those lines and the link; results/README.md is written beside.
  (tmp_path / "README.md").write_text(
    f"x\n{overview.OVERVIEW_BEGIN}\nold\n{overview.OVERVIEW_END}\n"
  )
  assert overview.write_results_overview(tmp_path)
  top = (tmp_path / "README.md").read_text()
  assert "- Confirmed: 2 of the paper's 3" in top and "(results/README.md)." in top
  assert (tmp_path / "results" / "README.md").read_text() == text


def test_a_hypothesis_row_carries_its_verdicts_words_every_caveat_and_the_earlier_verdict():
  h = PAPER["mnist"].hypotheses[2]
  falling = {"metric": "train_loss", "start": 40.0, "epoch": 50.0, "gelu": 0.05, "baseline": 0.03}
  low, high = (1, 2, 3, 4, 5), (6, 7, 8, 9, 10)
  pairs = [
    verdicts.Candidate((1e-3, 1e-3), Evidence(low, high, "s", (1e-3, 1e-3),
                                              caveats=(("falling", falling),))),
    verdicts.Candidate((1e-4, 1e-3), Evidence(high, low, "s", (1e-4, 1e-3))),
  ]  # fmt: skip
  (v,) = verdicts.judge([h], lambda _: pairs)
  (earlier,) = verdicts.judge([h], lambda _: pairs[0].evidence)
  found = analysis.Analysis("mnist", Design(()), [v], [])
  found.earlier_primary = [earlier]
  (got,) = overview.hypothesis_rows("mnist", found)
  assert got["where"] == "Fig. 2, primary 1" and got["paper"] == "gelu_tanh 0.044 vs relu 0.35"
  assert got["verdict"] == (
    "depends on the learning rate: confirmed at gelu_tanh lr 0.001 vs relu lr 0.001; refuted at "
    "gelu_tanh lr 0.0001 vs relu lr 0.001 (earlier design, the selected lrs alone: confirmed)"
  )
  assert got["caveats"] == (
    "the tested metric, final train_loss, still falls at the last epoch at 1 of the 2 pairs of "
    "candidate lrs (median fall over the last fifth of training, epochs 40–50: gelu_tanh 5.0%, "
    "relu 3.0%)"
  )
  assert got["ours"] == (
    "gelu_tanh lr 0.001 vs relu lr 0.001: gelu_tanh 3 vs relu 8; shift -5 [-8, -2]<br>"
    "gelu_tanh lr 0.0001 vs relu lr 0.001: gelu_tanh 8 vs relu 3; shift 5 [2, 8]"
  )
