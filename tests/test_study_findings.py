"""Tests for gelujax.study.findings and the words it says verdicts in (gelujax.study.wording):
each wording rule on statistics chosen by hand (the committed results' lines are re-derived in
tests/test_results.py)."""

import pytest

from gelujax.paper import PAPER, Design
from gelujax.study import analysis, findings, tables, verdicts, wording
from gelujax.study.verdicts import Evidence


def test_a_claim_whose_paper_values_contradict_it_says_so():
  h = next(h for h in PAPER["mnist"].hypotheses if h.baseline == "relu" and h.dropout == 0.0)
  assert findings.contradiction_line("mnist", h) == (
    "- Paper values [Fig. 2, gelu_tanh below relu: final train log loss (nats), dropout 0]: the "
    "paper's text claims gelu_tanh below relu, but its values, gelu_tanh 0.008 vs relu 0.007, put "
    "gelu_tanh above relu: the values quoted contradict the claim's direction; the hypothesis "
    "tests the text's claim."
  )


def test_verdict_words_and_lines():
  h = PAPER["mnist"].hypotheses[0]
  (undecided,) = verdicts.judge([h], lambda _: Evidence((1.0, 2.0, 3.0), (2.0, 1.0, 3.0), "s"))
  # Equal samples: shift 0, which no number of seeds decides.
  assert wording.verdict_words(undecided) == (
    "inconclusive, leaning neither way: no number of seeds decides the observed shift of 0"
  )
  (alone,) = verdicts.judge([h], lambda _: Evidence((1.0,), (2.0,), "s"))
  assert wording.verdict_words(alone) == (
    "inconclusive, leaning towards the claim: too few seeds to estimate the seeds a side 80% "
    "power would need"
  )
  (decided,) = verdicts.judge([h], lambda _: Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s"))
  assert findings.hypothesis_line("mnist", 1, decided) == (
    "- Hypothesis [Fig. 2, primary 1]: gelu_tanh below relu: final train log loss (nats), "
    "dropout 0: confirmed (gelu_tanh 3 vs relu 8, s; shift -5 [-8, -2], p = 0.0079, Holm 0.0079)."
  )
  (pending,) = verdicts.judge([h], lambda _: "pending: evaluation seeds not trained")
  assert wording.verdict_words(pending) == "pending: evaluation seeds not trained"


def test_an_equivalence_verdict_line_gives_the_verdicts_p_not_its_shifts():
  """The line's p is the one the verdict and its table row rest on: an equivalence claim's
  TOST-or-beyond p (twice the smaller one-sided p), not the rank-sum p of the shift."""
  h = next(h for h in PAPER["mnist_noise"].hypotheses if h.direction == "equivalent")
  gelu, relu = (0.50, 0.51, 0.52, 0.53, 0.54), (0.40, 0.41, 0.42, 0.43, 0.44)
  (v,) = verdicts.judge([h], lambda _: Evidence(gelu, relu, "s"))
  assert (f"{v.comparison.p:.2g}", f"{v.p:.2g}", v.verdict) == ("0.0079", "0.016", "refuted")
  assert findings.hypothesis_line("mnist_noise", 3, v) == (
    "- Hypothesis [Fig. 3, primary 3]: relu within ±0.02 of gelu_tanh: test accuracy under "
    "noise, dropout 0, a = 1: refuted (gelu_tanh 0.52 vs relu 0.42, s; shift 0.1 [0.07, 0.13], "
    "p = 0.016, Holm 0.016)."
  )


def test_the_exploratory_lines_of_an_equivalence_claim_give_the_verdicts_p():
  """Fig. 3's equivalence claims: the Paired and Sensitivity lines print the p a verdict rests
  on (the equivalence test's; paired, the paired one), and the p of a zero shift only as such."""
  from gelujax.study import stats

  h = next(h for h in PAPER["mnist_noise"].hypotheses if h.direction == "equivalent")
  gelu, relu = (0.50, 0.51, 0.52, 0.53, 0.54, 0.55), (0.40, 0.415, 0.42, 0.43, 0.44, 0.45)
  seeds = tuple(range(100, 106))
  e = Evidence(gelu, relu, "s", (1e-4, 1e-3), seeds, seeds)
  (v,) = verdicts.judge([h], lambda _: e)
  zero, verdict_p = v.comparison.p, v.p
  assert f"{zero:.2g}" != f"{verdict_p:.2g}"
  found = analysis.Analysis("mnist_noise", Design(()), [v], [])
  (line,) = findings.paired_lines(found)
  paired = stats.paired_equivalence_test(v.single.paired.differences, h.margin).p
  assert line.endswith(
    f"paired equivalence p = {paired:.2g} (within or beyond ±0.02), signed-rank p of a zero "
    f"shift = {v.single.paired.p:.2g}; unpaired: shift {wording.format_shift(v.comparison)}, "
    f"equivalence p = {verdict_p:.2g} (the verdict's), rank-sum p of a zero shift = {zero:.2g}."
  )
  other = verdicts.Comparison.of(relu, gelu)
  s = analysis.Sensitivity(h, (v.comparison, "evaluation seeds"), (1e-4, 1e-3), {1e-3: other})
  line = findings.sensitivity_line(3, s)
  assert (
    f"evaluation seeds: shift {wording.format_shift(v.comparison)}, equivalence p = "
    f"{verdict_p:.2g} (within or beyond ±0.02), rank-sum p of a zero shift = {zero:.2g}; "
  ) in line
  other_p = stats.equivalence_test(relu, gelu, h.margin).p
  assert f"equivalence p = {other_p:.2g} (within or beyond ±0.02)" in line.split("at lr 0.001")[1]
  assert f", p = {zero:.2g}" not in line


def test_curve_lines():
  spike = {"seed": 0, "epoch": 20.0, "value": 0.1072, "running_min": 0.01573, "ratio": 6.815}
  assert findings.curve_line("elu", 1e-3, "spike", spike) == (
    "- Final value on a spike [elu, lr 0.001, seed 0]: its training loss at the last evaluation "
    "(epoch 20), 0.1072, is 6.82x its running minimum 0.01573: every final value of this member "
    "was taken on that spike."
  )
  improving = {"median": 46.0, "at_last": 1, "members": 5, "epoch": 50.0}
  assert findings.curve_line("gelu", 1e-3, "improving", improving).startswith(
    "- Still improving [gelu, lr 0.001]: the median best epoch is 46 of 50, after 80% of training;"
  )
  with pytest.raises(ValueError, match="kind 'other'"):
    findings.curve_line("gelu", 1e-3, "other", {})


def test_an_inconclusive_verdict_says_which_way_it_leans_and_what_its_seeds_assume():
  below, above = PAPER["mnist"].hypotheses[0], PAPER["mnist"].hypotheses[0]  # gelu_tanh below relu.
  (towards,) = verdicts.judge([below], lambda _: Evidence((1.0, 2.0, 3.5), (2.0, 3.0, 4.0), "s"))
  assert wording.verdict_words(towards).startswith("inconclusive, leaning towards the claim: ")
  assert wording.verdict_words(towards).endswith(
    " seeds a side for 80% power if the observed effect were the true one"
  )
  (against,) = verdicts.judge([above], lambda _: Evidence((2.0, 3.0, 4.0), (1.0, 2.0, 3.5), "s"))
  assert wording.verdict_words(against).startswith("inconclusive, leaning against the claim: ")
  # An equivalence claim leans towards equivalence inside its margin, against it beyond.
  h = next(h for h in PAPER["mnist_noise"].hypotheses if h.direction == "equivalent")  # ±0.02.
  (inside,) = verdicts.judge([h], lambda _: Evidence((0.50, 0.52, 0.54), (0.5, 0.51, 0.52), "s"))
  assert wording.lean_words(inside.single, h) == "leaning towards the claim"
  (beyond,) = verdicts.judge([h], lambda _: Evidence((0.50, 0.52, 0.54), (0.4, 0.5, 0.44), "s"))
  assert wording.lean_words(beyond.single, h) == "leaning against the claim"


def test_caveat_words():
  h = PAPER["mnist"].hypotheses[0]
  caveats = (
    ("falling", {"metric": "train_loss", "start": 40.0, "epoch": 50.0, "gelu": 0.108,
                 "baseline": 0.172}),
    ("not_learning", {"run": "relu_dropout0.5", "learning_rate": 1e-3, "median": 0.4906,
                      "chance": 0.9, "classes": 10}),
    ("epochs", {"epochs": 20, "paper": 250}),
  )  # fmt: skip
  e = Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s", caveats=caveats)
  (v,) = verdicts.judge([h], lambda _: e)
  assert wording.caveat_words(v.single, h) == (
    "caveats: the tested metric, final train_loss, still falls at the last epoch (median fall "
    "over the last fifth of training, epochs 40–50: gelu_tanh 10.8%, relu 17.2%); "
    "relu_dropout0.5 does not learn at lr 0.001 (median test error 49.06%, above 50% of the "
    "chance error 90%); judged at epoch 20 of the paper's 250"
  )
  assert findings.hypothesis_line("mnist", 1, v).endswith(
    "Holm 0.0079); " + wording.caveat_words(v.single, h) + "."
  )
  (plain,) = verdicts.judge([h], lambda _: Evidence((1, 2, 3, 4, 5), (6, 7, 8, 9, 10), "s"))
  assert wording.caveat_words(plain.single, h) == ""


def candidate_verdict(h, pairs, others=()):
  found = [
    verdicts.Candidate(lrs, rest[0] if len(rest) == 1 else Evidence(*rest, "s", lrs))
    for lrs, *rest in pairs
  ]
  return verdicts.judge([h, *others], lambda x: found if x is h else "pending: x")[0]


def test_the_words_of_a_hypothesis_tested_at_several_pairs_of_candidate_lrs():
  h = PAPER["mnist"].hypotheses[0]
  low, high = (1, 2, 3, 4, 5), (6, 7, 8, 9, 10)
  depends = candidate_verdict(h, [((1e-4, 1e-3), high, low), ((1e-3, 1e-3), low, high)])
  assert wording.verdict_words(depends) == (
    "depends on the learning rate: refuted at gelu_tanh lr 0.0001 vs relu lr 0.001; confirmed "
    "at gelu_tanh lr 0.001 vs relu lr 0.001"
  )
  assert findings.verdict_lines("mnist", [depends], None) == [
    "- Hypothesis [Fig. 2, primary 1]: gelu_tanh below relu: final train log loss (nats), "
    "dropout 0: " + wording.verdict_words(depends) + "; tested at 2 pairs of candidate lrs "
    "(gelu_tanh 0.0001, 0.001 × relu 0.001), each a Candidate line.",
    "- Candidate [Fig. 2, primary 1a: gelu_tanh lr 0.0001 vs relu lr 0.001]: refuted (gelu_tanh "
    "8 vs relu 3, s; shift 5 [2, 8], p = 0.0079, Holm 0.016).",
    "- Candidate [Fig. 2, primary 1b: gelu_tanh lr 0.001 vs relu lr 0.001]: confirmed "
    "(gelu_tanh 3 vs relu 8, s; shift -5 [-8, -2], p = 0.0079, Holm 0.016).",
  ]
  agree = candidate_verdict(h, [((1e-4, 1e-3), low, high), ((1e-3, 1e-3), low, high)])
  assert wording.verdict_words(agree) == "confirmed at every pair of candidate lrs (2)"


def test_a_verdict_over_several_pairs_carries_every_pairs_caveats():
  """Fig. 2, primary 3: the verdict line and its table row carry what the Candidate lines do:
  the metric still falling at every pair (each run's fall as a range over the pairs) and the
  baseline not learning, at each of its lrs; each once."""
  h = PAPER["mnist"].hypotheses[2]

  def caveats(gelu, relu, lr):
    return (
      ("falling", {"metric": "train_loss", "start": 40.0, "epoch": 50.0, "gelu": gelu,
                   "baseline": relu}),
      ("not_learning", {"run": "relu_dropout0.5", "learning_rate": lr, "median": 0.4906,
                        "chance": 0.9, "classes": 10}),
    )  # fmt: skip

  low, high = (1, 2, 3, 4, 5), (6, 7, 8, 9, 10)
  pairs = [
    verdicts.Candidate((1e-3, 1e-3), Evidence(low, high, "s", (1e-3, 1e-3),
                                              caveats=caveats(0.048, 0.033, 1e-3))),
    verdicts.Candidate((1e-4, 1e-3), Evidence(low, high, "s", (1e-4, 1e-3),
                                              caveats=caveats(0.088, 0.033, 1e-3))),
    verdicts.Candidate((1e-4, 1e-4), Evidence(low, high, "s", (1e-4, 1e-4),
                                              caveats=caveats(0.088, 0.035, 1e-4)[1:])),
  ]  # fmt: skip
  (v,) = verdicts.judge([h], lambda _: pairs)
  said = (
    "caveats: the tested metric, final train_loss, still falls at the last epoch at 2 of the 3 "
    "pairs of candidate lrs (median fall over the last fifth of training, epochs 40–50: "
    "gelu_tanh 4.8–8.8%, relu 3.3%); relu_dropout0.5 does not learn at lr 0.001 (median test "
    "error 49.06%, above 50% of the chance error 90%); relu_dropout0.5 does not learn at lr "
    "0.0001 (median test error 49.06%, above 50% of the chance error 90%)"
  )
  assert wording.verdict_caveat_words(v) == said
  line = findings.hypothesis_line("mnist", 3, v)
  assert line.startswith("- Hypothesis [Fig. 2, primary 3]: ") and line.endswith(f"; {said}.")
  row = tables.format_hypotheses([v], 3).splitlines()[2]
  assert row.startswith("| 3 | ") and row.endswith(f"; {said} |")
  # One pair: its own caveats, as before.
  (single,) = verdicts.judge([h], lambda _: pairs[0].evidence)
  assert wording.verdict_caveat_words(single) == wording.caveat_words(single.single, h)


def test_a_pending_verdict_names_the_runs_to_train_and_the_command():
  h = PAPER["mnist"].hypotheses[0]
  v = candidate_verdict(
    h,
    [((1e-4, 1e-3), (1, 2, 3, 4, 5), (6, 7, 8, 9, 10)),
     ((1e-3, 1e-3), "pending: evaluation seeds not trained at candidate lr 0.001 of gelu_tanh")],
  )  # fmt: skip
  found = analysis.Analysis("mnist", Design(tuple(range(100, 110))), [v], [])
  found.untrained = {h: [("gelu_tanh", 1e-3, "gelu_tanh_eval_lr0.001")]}
  found.evaluation_seeds = tuple(range(100, 110))
  found.command = "python experiments/reproduce.py --task=mnist"
  assert wording.verdict_words(v, found) == (
    "pending: candidate lr 0.001 of gelu_tanh needs evaluation seeds 100–109 "
    "(gelu_tanh_eval_lr0.001; `python experiments/reproduce.py --task=mnist` trains them)"
  )
  # Without the analysis: the first pending pair's reason.
  assert wording.verdict_words(v) == (
    "pending: evaluation seeds not trained at candidate lr 0.001 of gelu_tanh"
  )
  assert findings.candidate_line("mnist", 1, v, 1) == (
    "- Candidate [Fig. 2, primary 1b: gelu_tanh lr 0.001 vs relu lr 0.001]: pending: evaluation "
    "seeds not trained at candidate lr 0.001 of gelu_tanh."
  )


def test_paired_and_candidates_lines():
  h = PAPER["mnist"].hypotheses[0]
  gelu, relu = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (1.5, 3.0, 3.5, 5.0, 5.5, 7.0)
  e = Evidence(gelu, relu, "s", (1e-4, 1e-3), tuple(range(100, 106)), tuple(range(100, 106)))
  (v,) = verdicts.judge([h], lambda _: e)
  found = analysis.Analysis("mnist", Design(()), [v], [])
  # Differences -0.5, -1, -0.5, -1, -0.5, -1: one sign, signed-rank p = 2/64; Walsh averages
  # -0.5 (6), -0.75 (9), -1 (6): median -0.75; 6 pairs: the 1st and 21st (all), -1 and -0.5.
  assert findings.paired_lines(found) == [
    "- Paired [Fig. 2, primary 1: gelu_tanh lr 0.0001 vs relu lr 0.001]: 6 pairs (seeds "
    "100–105), correlation 0.99; paired shift -0.75 [-1, -0.5], signed-rank p = 0.031; "
    f"unpaired: shift {wording.format_shift(v.comparison)}, rank-sum p = {v.comparison.p:.2g}."
  ]
  found.candidates = [
    analysis.Candidates("gelu_tanh", 1e-4, [(1e-4, None, True), (1e-3, 0.84, True),
                                            (1e-5, 0.0079, False)]),
    analysis.Candidates("relu", 1e-3, [(1e-3, None, True), (1e-4, None, False)]),
    analysis.Candidates("elu", None, []),
  ]  # fmt: skip
  assert findings.candidates_lines(found) == [
    "- Candidates [gelu_tanh]: lr 0.0001 (selected), lr 0.001 (p = 0.84); not candidates: "
    "lr 1e-05 (p = 0.0079).",
    "- Candidates [relu]: lr 0.001 (selected); not candidates: lr 0.0001 (every member diverged).",
    "- Candidates [elu]: none, every member diverged.",
  ]


def test_how_an_unseen_word_is_read_follows_the_runs_model():
  plain = {"model": "embedding_mlp_twitter_pos", "model_options": {}, "data_options": {}}
  assert findings.unseen_words(plain).endswith(
    "read as UUUNKKK, a vector no training token reaches"
  )
  pretrained = {**plain, "data_options": {"embeddings": "vectors.txt"}}
  assert findings.unseen_words(pretrained) == ""
  spelled = {**plain, "model": "spelling_mlp_twitter_pos"}
  assert findings.unseen_words(spelled).endswith(
    "UUUNKKK (a vector no training token reaches) plus the word's own spelling (character "
    "n-grams, shape flags)"
  )
  dropped = {**spelled, "model_options": {"word_dropout": 0.25}}
  assert "UUUNKKK (trained on the train words word dropout replaces by it)" in (
    findings.unseen_words(dropped)
  )
