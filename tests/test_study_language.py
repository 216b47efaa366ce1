"""The language model's study (`gelujax.study.language.CHAR_LM`): its margin, seeds and lrs as
the rule takes them from the two committed pilots, recomputed here from the pilots' files with
SciPy in float64; its controls' grids."""

import json
import math
from pathlib import Path

import numpy as np
import scipy.stats

from gelujax.study import language, registry, transformer, transformer_design

ROOT = Path(__file__).resolve().parents[1]
PILOTS = ROOT / "results" / "tiny_shakespeare"


def best_losses(pilot: str, arm: str) -> dict[int, float]:
  """seed -> the member's validation loss at its best evaluation, at lr 2e-3 (every arm's)."""
  summary = json.loads((PILOTS / pilot / "runs" / arm / "summary.json").read_text())
  return {
    m["seed"]: m["best"]["validation_loss"]
    for m in summary["members"]
    if m["learning_rate"] == 2e-3
  }


def sd_bound(d: np.ndarray) -> float:
  """The one-sided 80% upper bound of the SD of ``d`` for normal differences."""
  k = len(d) - 1
  return float(np.std(d, ddof=1) * math.sqrt(k / scipy.stats.chi2.ppf(0.2, k)))


def test_the_margin_and_the_seeds_follow_from_the_pilots_by_the_rule():
  """The margin: the smallest candidate at which gelu_ffn256 − gelu's mean pilot gap lies in 1 to
  3 margins (0.0291 nats: 0.01). The seeds: the most pairs of the ranking (a shift of 1% of
  gelu's median pilot loss, two-sided at 0.05 / 5, signed-rank efficiency) and of the forms'
  TOST at that margin (each side at 0.05 / 2 / 2), between the floor (8) and the cap (20)."""
  d = registry.resolve("char_lm_study").kind.prepare(registry.get("char_lm_study"), ROOT, "x")
  gelu = best_losses("char_lm_pilot", "gelu")
  narrow = best_losses("char_lm_controls_pilot", "gelu_ffn256")
  again = best_losses("char_lm_controls_pilot", "gelu")
  gap = float(np.mean([narrow[s] - again[s] for s in again]))
  margin = min(c for c in (0.005, 0.01, 0.02, 0.05) if 1 <= gap / c <= 3)
  assert margin == 0.01 and d.margins == {"final.test_loss": margin}

  def diffs(first, second):
    a = best_losses("char_lm_pilot", transformer.runs.run_name(first))
    b = best_losses("char_lm_pilot", second)
    return np.array([a[s] - b[s] for s in sorted(a)])

  z = scipy.stats.norm.ppf
  shift = 0.01 * float(np.median(list(gelu.values())))
  ranking = max(
    math.ceil(((z(1 - 0.01 / 2) + z(0.8)) * sd_bound(diffs(a, b)) / shift) ** 2 * math.pi / 3)
    for a, b in language.RANKING
  )
  forms = max(
    math.ceil(((z(1 - 0.0125) + z(0.9)) * sd_bound(diffs(a, b)) / margin) ** 2 * math.pi / 3)
    for a, b in transformer.FORMS_PAIRS
  )
  assert (ranking, forms) == (31, 20)  # the ranking's need is more than the cap
  assert d.sizing.ranking_needed == {"final.test_loss": ranking}
  assert d.seeds == tuple(range(400, 400 + min(20, max(8, ranking, forms))))
  assert set(d.learning_rates.values()) == {2e-3}


def test_the_design_says_how_many_pairs_its_positive_control_needs():
  """Were the control's pilot gap (+0.0291 nats) true, the pairs that find it beyond the margin
  (one-sided at 0.05 / 4, as a family of one decides beyond a margin) with 80% power, at the
  pilot's paired SD and at its bound, by the normal approximation at the signed-rank test's
  efficiency: 16 and 47 against the design's 20, so the README says it may fall short."""
  d = transformer.filled(language.CHAR_LM, ROOT)
  narrow = best_losses("char_lm_controls_pilot", "gelu_ffn256")
  gelu = best_losses("char_lm_controls_pilot", "gelu")
  diff = np.array([narrow[s] - gelu[s] for s in sorted(gelu)])
  z = scipy.stats.norm.ppf
  need = [
    math.ceil(
      ((z(1 - 0.05 / 4) + z(0.8)) * sd * math.sqrt(math.pi / 3) / (diff.mean() - 0.01)) ** 2
    )
    for sd in (np.std(diff, ddof=1), sd_bound(diff))
  ]
  assert need == [16, 47]
  (line,) = [x for x in transformer_design.sizing_lines(d) if "control gelu_ffn256" in x]
  assert f"by {need[0]} pairs at the pilot's SD, {need[1]} at the SD's bound" in line
  assert "the design has 20: at the bound, short of that power." in line


def test_the_design_says_how_many_pairs_its_negative_control_needs():
  """gelu against gelu on other seeds shares no seed: its pairs' SD is about √2 times gelu's SD
  across the pilot's 4 selection seeds. A true shift of 0 is found within the margin (each
  one-sided test at 0.05 / 2, a family of one) with 80% power by the normal approximation at the
  signed-rank test's efficiency: 7 pairs at that SD, 21 at its 80% bound, against the design's
  20, so the README says it may fall short."""
  d = transformer.filled(language.CHAR_LM, ROOT)
  gelu = np.array(list(best_losses("char_lm_pilot", "gelu").values()))
  z = scipy.stats.norm.ppf
  need = [
    math.ceil(((z(1 - 0.025) + z(0.9)) * math.sqrt(2 * math.pi / 3) * sd / 0.01) ** 2)
    for sd in (np.std(gelu, ddof=1), sd_bound(gelu))
  ]
  assert need == [7, 21]
  (line,) = [x for x in transformer_design.sizing_lines(d) if "negative control" in x]
  assert f"has an SD of {np.std(gelu, ddof=1):.3g} nats over its 4 selection seeds" in line
  assert f"({sd_bound(gelu):.3g} at its 80% upper bound)" in line
  assert f"by {need[0]} pairs at that SD, {need[1]} at its bound" in line
  assert "the design has 20: at the bound, short of that power." in line


def test_its_controls_train_narrower_and_on_other_seeds():
  """gelu_ffn256 trains gelu with a feed-forward of 256 on the study's seeds; gelu_seeds500
  trains gelu as the task has it on seeds 500-519; every other arm the study's 400-419."""
  d = transformer.filled(language.CHAR_LM, ROOT)
  made = {g.name: g for g in transformer.make_grids(d, Path("/out"))}
  assert set(made) == {transformer.runs.run_name(a) for a in language.ARMS}
  assert made["gelu_seeds500"].seeds == tuple(range(500, 520))
  assert made["gelu_seeds500"].spec == made["gelu"].spec
  assert made["gelu_ffn256"].seeds is None
  assert made["gelu_ffn256"].spec.model_options["hidden_features"] == 256
  assert made["gelu_ffn256"].spec.activation == "gelu"
  assert [g.seeds for n, g in made.items() if n not in ("gelu_seeds500",)] == [None] * 8
  assert registry.fixed_in(d) == "`gelujax/study/language.py` (`CHAR_LM`, 2026-11-29)"


def test_its_caveats_say_what_its_seeds_and_its_measure_are():
  """The study compares each member after its last step and sizes its seeds for the ranking:
  its caveats say so, and do not set the wrong form's last epoch against a best-validation
  epoch no measure of it uses (the committed transformer studies still say both theirs)."""
  d = transformer.filled(language.CHAR_LM, ROOT)
  text = " ".join(transformer_design.caveat_lines(d))
  assert "the seeds were sized for the ranking family's shift of 1% within a cap" in text
  assert "best-validation epoch" not in text and "sized for the forms family" not in text
  vit = " ".join(transformer_design.caveat_lines(transformer.VIT))
  assert "sized for the forms family" in vit and "not at their best-validation epoch" in vit
