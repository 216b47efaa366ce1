"""Tests for gelujax.findings: the verdicts and wording of findings on hand-made statistics.

The findings of the committed results are re-derived from their files in tests/test_results.py.
"""

import pytest
import scipy.stats

from gelujax import findings, sweep
from tests.fake_workdirs import constant, member, write_workdir


def claim_entry(better_values, worse_values, outcome_tests=1):
  family = sweep.Family()
  test = family.test("s", "m", ("gelu_tanh", better_values), ("elu", worse_values))
  for i in range(outcome_tests - 1):
    family.test("s", "m", (f"x{i}", [0.0]), ("y", [1.0]))
  family.correct()
  metric = findings.Metric("final.train_loss", "m")
  claim = {"scope": "s", "metric": metric, "test": test, "better": "gelu_tanh", "worse": "elu"}
  return findings.claim_finding("mnist", {**claim, "paper": (0.044, 0.105)})


@pytest.mark.parametrize(
  ("better", "worse", "tests", "status"),
  [
    # The paper's order, no overlap, 5 seeds: p = 0.0079, one test: Holm 0.0079.
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 1, "reproduced, beyond the seed spread"),
    # The same, among 7 tests: Holm 0.056.
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 7, "not reproduced, same order, p < 0.05 before"),
    ([1, 3, 5, 7, 9], [2, 4, 6, 8, 10], 1, "not reproduced, same order, within the seed spread"),
    ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 1, "contradicted, opposite order, beyond the seed"),
    ([2, 4, 6, 8, 10], [1, 3, 5, 7, 9], 1, "not reproduced, opposite order, within the seed"),
    ([1, 2, 3], [3, 2, 1], 1, "not reproduced, equal medians, within the seed spread"),
  ],
)
def test_claim_verdicts(better, worse, tests, status):
  line = claim_entry(better, worse, tests)
  assert line.startswith(
    "- Paper [s], m: Fig. 2 has gelu_tanh below elu (its values: 0.044 vs 0.105); here gelu_tanh "
  )
  assert f": {status}" in line


def test_selection_finding_tests_the_runner_up(tmp_path):
  # lr 1e-4 wins (medians 0.16 vs 0.2 of 1e-3 vs 0.41 of 1e-5); seed values 0.15, 0.5, 0.16
  # against 0.3, 0.1, 0.2: exact p of 3 vs 3 (scipy).
  bests = {1e-3: [0.3, 0.1, 0.2], 1e-4: [0.15, 0.5, 0.16], 1e-5: [0.4, 0.41, 0.42]}
  members = [
    member(seed, lr, train_loss=constant(0.1), validation_loss=[b[seed] + 0.5, b[seed], 9.0])
    for lr, b in bests.items()
    for seed in range(3)
  ]
  row = sweep.summarize_run(sweep.load_run(write_workdir(tmp_path / "gelu", members)))
  analysis = findings.Analysis(sweep.Family(), 3)
  findings.add_selections(analysis, [row])
  analysis.family.correct()
  (line,) = findings.selection_findings(analysis)[1:]
  p = scipy.stats.mannwhitneyu([0.15, 0.5, 0.16], [0.3, 0.1, 0.2], method="exact").pvalue
  assert line == (
    f"- Selection [gelu]: lr 0.0001 over lr 0.001, median best validation_loss 0.16 vs 0.2: "
    f"within the seed spread (p = {p:.2g}, Holm {p:.2g})."
  )
