"""The corrections of each fixed study: statements of a design (its reasons, or a rule it left
unstated or stated twice) found wrong after its runs, kept beside the design, which stays as it
was fixed, its verdicts as they were reached, and rendered in its result's README under
Corrections, dated (:func:`lines`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping


@dataclasses.dataclass(frozen=True)
class Correction:
  """A statement of a fixed design found wrong after its runs, kept beside the design (which
  stays as it was fixed, its verdicts as they were reached) and rendered in its result's README.

  Attributes:
    date: when the correction was made (UTC).
    where: what the statement is part of.
    wrong: the statement, as the design says it (or, for a rule it left unstated, as it acts).
    true: what is true instead, in words.
    facts: the facts derived at render time that show it, which the study's report words (the
      forms study's, :mod:`gelujax.study.forms_report`): ``"paper_gaps"`` (the paper's
      test-error gaps against the margin),
      ``"fig2_ratios"`` (Fig. 2's final train losses, as ratios), ``"paired_sd"`` (what the
      design's pairs could resolve), ``"whole_images"`` (the test errors compared in whole
      images instead).
  """

  date: str
  where: str
  wrong: str
  true: str
  facts: tuple[str, ...] = ()


# One rule stated twice, unified after the runs: said wherever a committed README stated it.
BOUNDARY = Correction(
  "2026-11-29",
  "the decision boundary of the forms and control families (`gelujax.study.forms.judge`)",
  "a verdict was reached where the Holm-adjusted p was at most the level, while every other "
  "judge of this project decides where it is below: one rule, two boundaries",
  "every judge now decides below the level; an exact paired p is a whole count over a "
  "power of two, which a level such as 0.05 is not, and the verdicts re-rendered under the "
  "one boundary are those reached",
)

# Words of a forms report found wrong after the runs, said wherever a committed README said them.
PAIRS_WORDS = Correction(
  "2026-11-29",
  "the pairs that would decide an inconclusive forms or control comparison "
  "(`gelujax.study.forms_words.pairs_words`)",
  "each such cell named the pairs that would decide it, not the decision they would reach, so "
  "that a control's cell (relu or identity against gelu) read as if more pairs would pass it",
  "those pairs would find the comparison *equivalent* where its shift lies inside the margin "
  "and *different* where beyond (`gelujax.study.power.pairs_for_power`); each cell now says "
  "which, and a control's *equivalent* would fail it",
)
MARGIN_RULE = Correction(
  "2026-11-29",
  "the reason of the margin rule (`gelujax.study.transformer.from_pilot`)",
  "the design called the margin it takes “the tightest equivalence the budget can show”",
  "where no candidate margin gives every forms test its power within the seed cap, the rule "
  "takes the largest candidate, the loosest, at which the tests named short of power still "
  "are; the Margins line now says so",
)
SHORT_OF_POWER = Correction(
  "2026-11-29",
  "the forms tests the seed cap left short of power",
  "the Design said of each “this test could not have passed with the design's power”, and the "
  "forms table said so beside gelu_tanh − gelu on the test loss, which passed (*equivalent* "
  "before the control's gate); and What this does not show called the margin “a margin the "
  "budget could show”",
  "a test short of power can pass by chance or by a smaller spread than the pilot's bound; the "
  "Design now says “short of the design's power”, the table says “could not have passed” "
  "only beside a test that did not pass, and What this does not show says that some forms "
  "tests were short of the design's power at the margin",
)

# One word for one decision, said in both transformer studies' READMEs.
RANKING_WORD = Correction(
  "2026-11-29",
  "the ranking family's word for a decision on the claimed side (`gelujax.study.confirm."
  "judge_family`)",
  "the transformer studies called it *supported*, while the confirmation and the paper's "
  "tasks call the same decision, by the same rule, *confirmed*: one rule, two words",
  "every judge now says *confirmed*; no decision changed",
)

# The control's gate of the transformer studies, said in both READMEs.
CONTROL_CALIBRATION = Correction(
  "2026-11-29",
  "what the control shows (`gelujax.study.transformer_verdicts.gate_line`)",
  "where identity was found different from gelu on every metric, the README said “the design "
  "can tell a linear feed-forward from gelu, so its *equivalent* verdicts stand”",
  "a control many margins away shows only that the design sees a large gap, not one of the "
  "margin's size: an *equivalent* is now reported as calibrated only where its metric's control "
  "was found different within 3 margins, or where its own paired differences find a true "
  "2-margin shift different in at least 80% of 2000 seeded resamples "
  "(`gelujax.study.calibration`), else as “equivalent (same seeds), control uncalibrated”; each "
  "forms row also shows its zero-shift p, and how near its pairs stay to one network",
)

# The forms studies' control, said in both READMEs.
FORMS_CONTROL_CALIBRATION = Correction(
  "2026-11-29",
  "what the control shows (`gelujax.study.forms_words.equivalents_line`)",
  "the findings counted an *equivalent* as one that survives the control wherever the control "
  "was found different from gelu in its dtype, lr and metric, however many margins away",
  "a control many margins away shows only that the design sees a large gap: an *equivalent* "
  "is now calibrated by the control only where it was found different within 3 margins, else "
  "by its own paired differences (2000 seeded resamples centred at zero find a true 2-margin "
  "shift different in at least 80%), else it is marked ‡, *equivalent* with the same seeds, "
  "control uncalibrated (`gelujax.study.calibration`); the counts of those calibrated are "
  "those that survived before. An *equivalent* of paired seeds is a same-seed statement: the "
  "findings now show, for each, the per-seed correlation of its two arms, the pairs at the same "
  "best epoch and each arm's SD across seeds beside the paired SD",
)

# The pilots' Method, said in each pilot's README.
PILOT_QUANTILE = Correction(
  "2026-11-29",
  "the Method's line on the SD's bound (`gelujax.study.pilot_report.method_lines`)",
  "it called the chi-square quantile “SciPy's”",
  "it is computed without SciPy, by `gelujax.study.power.chi2_quantile`, exactly (within 1e-10 "
  "of SciPy's, tested), as every study's bound is; no number changed",
)

# The corrections of each design, by its name.
CORRECTIONS: dict[str, tuple[Correction, ...]] = {
  "gelu_forms": (
    Correction(
      "2026-11-27",
      "the reason of the test-error margin",
      "the design says that 0.2 points is “below the smallest gap the GELU paper reports "
      "between activations (0.1-0.3 points on Twitter POS)”",
      "it is not, and those are not Twitter POS's gaps",
      ("paper_gaps", "paired_sd"),
    ),
    Correction(
      "2026-11-27",
      "the reason of the final-train-loss margin",
      "the design says that “the GELU paper's Fig. 2 separates activations by factors of 2”",
      "it does so only with dropout, which this design does not use",
      ("fig2_ratios",),
    ),
    Correction(
      "2026-11-27",
      "how test error is compared, a rule the design left unstated",
      "the design compares test error as the float rate each network's records hold",
      "a rate of the 10,000 test images is a count of images: as floats, two networks that err "
      "on equally many images can differ by a rounding error, differences of equally many "
      "images are not ties, and a difference of exactly the margin (20 images) is not exactly "
      "the margin. The verdicts are those of the rule as it acted, pre-registered and kept; the "
      "later design compares whole images (`whole_test_error`)",
      ("whole_images",),
    ),
    BOUNDARY,
    PAIRS_WORDS,
    FORMS_CONTROL_CALIBRATION,
  ),
  "gelu_forms_powered": (BOUNDARY, FORMS_CONTROL_CALIBRATION),
  "vit_fashion_mnist_study": (
    BOUNDARY,
    MARGIN_RULE,
    CONTROL_CALIBRATION,
    RANKING_WORD,
    Correction(
      "2026-11-29",
      "the forms verdicts' tight intervals",
      "the README called gelu_tanh − gelu and geglu(approximate=True) − geglu *equivalent* "
      "without saying that their pairs stay nearly one network (all 11 gelu_tanh − gelu pairs "
      "pick the same best epoch and their per-seed values correlate at +1.00), and without "
      "saying that gelu_tanh − gelu's test-error interval [-5.5, -1.5] images excludes zero",
      "*equivalent* here is a same-seed statement (one initial draw, one batch order, the other "
      "form); each forms row now shows the zero-shift p (0.0039 there), and the closeness lines "
      "the per-seed correlation, the pairs with the same best epoch and each arm's SD across "
      "seeds beside the paired SD",
    ),
  ),
  "transformer_twitter_pos_study": (
    BOUNDARY,
    Correction(
      "2026-11-29",
      "the Design's control line on the test loss (`gelujax.study.transformer_report`)",
      "the pilot's identity − gelu loss gap was printed as “-0.0259 nats, 0.518 margins”: the "
      "gap in margins without its sign",
      "it is -0.518 margins (identity's validation loss was the lower); the gap in margins is "
      "now printed signed, as the gap is",
    ),
    MARGIN_RULE,
    SHORT_OF_POWER,
    PAIRS_WORDS,
    CONTROL_CALIBRATION,
    RANKING_WORD,
    Correction(
      "2026-11-29",
      "the choice of identity as the control",
      "the study took identity as its positive control, while its pilot's condition was a gap "
      "“many times its margin”",
      "the pilot's gaps were +2 margins on validation error and -0.518 margins on validation "
      "loss (identity the lower), so the condition did not hold on either metric; the Design's "
      "control lines now say so, and on test loss the control was not found different",
    ),
  ),
  "char_lm_study": (
    Correction(
      "2026-11-29",
      "the controls' power, a statement the design left unstated "
      "(`gelujax.study.transformer_design`)",
      "the design did not say how many pairs its positive control needs to be found *different* "
      "were its pilot gap true, nor how many its negative control needs to be found "
      "*equivalent*, its pairs sharing no seed",
      "the Design's control lines now say both, at the pilot's SD and at its bound, against the "
      "design's seeds; they were added after relu's and gelu's runs and before either "
      "control's, and no number of the design changed",
    ),
  ),
  "vit_fashion_mnist_pilot": (PILOT_QUANTILE,),
  "transformer_twitter_pos_pilot": (PILOT_QUANTILE,),
  "char_lm_pilot": (
    PILOT_QUANTILE,
    Correction(
      "2026-11-29",
      "the Design's task line (`gelujax.study.pilot_report.design_lines`)",
      "it said “one evaluation of the validation split per epoch”, as every pilot's line did "
      "whatever its task",
      "char_lm evaluates twice an epoch (every 250 steps, `evals_per_epoch` 2), and a member's "
      "best is the best of those 8 evaluations; the line now reads the task's count",
    ),
  ),
  "twitter_pos_confirm": (
    Correction(
      "2026-11-29",
      "the Power line's SD bounds (`gelujax.study.confirm.pilot`)",
      "the chi-square quantile of each SD's one-sided upper bound was Wilson and Hilferty's "
      "approximation, while the pilots and the transformer studies computed the same bound "
      "exactly: one rule, two numbers",
      "every study now takes the exact quantile (`gelujax.study.power.sd_upper_factor`), which "
      "raises the bounds, and what they detect and need, slightly; the seeds the pilot asks "
      "for, and every verdict, are unchanged",
    ),
  ),
}


def lines(
  name: str,
  fixed: str,
  facts: Mapping[str, Callable[[], str]] | None = None,
  kept: str = "the verdicts below are those it reached",
) -> list[str]:
  """The Corrections section's lines for the design ``name``, fixed on ``fixed``: a sentence
  saying what the corrections are, then one line each, followed by the facts that show it
  (``facts``: a name of `Correction.facts` -> its words, derived at render time) and what
  stands as it was (``kept``: a study's verdicts, a pilot's numbers); ``[]`` for a design
  without corrections."""
  found = CORRECTIONS.get(name, ())
  if not found:
    return []
  facts = facts or {}
  shown = [
    f"- {c.date}, {c.where}: {c.wrong}; in fact, {c.true}."
    + "".join(f" {words[0].upper()}{words[1:]}." for fact in c.facts if (words := facts[fact]()))
    for c in found
  ]
  return [
    "Statements of the design found wrong after its runs, corrected here rather than in the "
    f"design, which stays as it was fixed on {fixed} (`gelujax.study.corrections.CORRECTIONS`): "
    f"{kept}.",
    "",
    *shown,
  ]
