"""The language model's study: the feed-forward activations of ``char_lm`` (a character-level GPT
on Tiny Shakespeare at nanoGPT's CPU configuration) ranked after Shazeer (2020) on test loss
after the last step, the GELU forms held within a margin, a positive and a negative control,
fixed here on 2026-11-29 before any of its runs was trained.

A literal of the transformer study's design (`gelujax.study.transformer.Design`): its arms,
families and rules are data; each arm's lr, the margin and the seeds come from the committed
pilots `char_lm_pilot` (the activations) and `char_lm_controls_pilot` (the narrower
feed-forward) by the rule `gelujax.study.transformer.from_pilot` states, the seeds sized for the
ranking family: its power to detect a shift of 1% of gelu's pilot loss.
"""

from __future__ import annotations

from gelujax.study import grids, pilot, transformer

# The positive control: gelu at half the task's feed-forward width, whose pilot gap to gelu is
# about the margin's size; the negative control: gelu again on other seeds.
POSITIVE = "gelu_ffn256"
NEGATIVE = "gelu_seeds500"
NEGATIVE_OFFSET = 100  # the negative control trains each study seed + 100 (from 500)

ARMS = (
  "relu",
  "gelu",
  "gelu_tanh",
  "geglu(approximate=True)",
  "geglu",
  "swiglu",
  "reglu",
  POSITIVE,
  NEGATIVE,
)
RANKING = (
  ("gelu", "relu"),
  ("geglu", "gelu"),
  ("geglu(approximate=True)", "gelu_tanh"),
  ("reglu", "relu"),
  ("swiglu", "relu"),
)
LOSS = transformer.Measure(
  "final.test_loss", "test loss (nats a character) after the last step", pilot.LOSS
)

CHAR_LM = transformer.Design(
  name="char_lm_study",
  date="2026-11-29",
  task="char_lm",
  dataset="tiny_shakespeare",
  pilot=pilot.CHAR_LM,
  control_pilot=pilot.CHAR_LM_CONTROLS,
  epochs=4,
  examples=0,  # no measure counts whole characters: the loss alone is compared
  unit="characters",
  arms=ARMS,
  control=POSITIVE,
  negative=NEGATIVE,
  ranking=RANKING,
  measures=(LOSS,),
  variants={
    POSITIVE: grids.Variant(
      "gelu", {"hidden_features": 256}, "gelu with a feed-forward of 256, half the task's 512"
    ),
    NEGATIVE: grids.Variant(
      "gelu",
      words=f"gelu on other seeds, each study seed + {NEGATIVE_OFFSET}",
      seed_offset=NEGATIVE_OFFSET,
    ),
  },
  seed_start=400,
  max_seeds=20,
  seeds_for=transformer.FOR_RANKING,
  relative_shift=0.01,
  control_gap=(1.0, 3.0),
  control_words="a feed-forward of half the width",
  figure="validation_loss",
  lead=0,  # The language model leads the results: where the family's claims were made.
  epochs_reason="the task's 4 (2000 steps of 12 windows of 64 characters, nanoGPT's CPU "
  "configuration) and the pilots', so that their spread applies",
  tie_rule="none is taken: every member is compared after its last step, the fixed number of "
  "steps the issue states, whatever its validation loss did before",
  ranking_reason=(
    "the orderings Shazeer (2020, 'GLU Variants Improve Transformer', Table 1: held-out "
    "log-perplexity of T5's feed-forward variants at a matched parameter count) leads one to "
    "expect: each gated unit below its ungated form (GEGLU below GELU; geglu(approximate=True), "
    "Gemma's gate, below gelu_tanh; ReGLU below ReLU), SwiGLU below ReLU (its ungated form, "
    "Swish, is no arm here: ReLU is the baseline Shazeer's table starts from), and GELU below "
    "ReLU. Directional, each tested both ways so that a verdict can refute: one one-sided "
    "signed-rank test at half the level a way, which is the two-sided test and its side "
    "(`gelujax.study.confirm.judge_family`)"
  ),
  control_reason=(
    "gelu at half the feed-forward width (256 of 512) keeps the activation, the data and the "
    "training and removes parameters; its gap to gelu in the controls' pilot is about the "
    "margin's size (the condition: 1 to 3 margins), so a design that finds it *different* is "
    "shown to see a gap that small. It must come out *different* on every metric, or every "
    "*equivalent* of the study is reported as *not established*"
  ),
  negative_reason=(
    "gelu trained again on other seeds and compared with gelu in seed order: two networks of "
    "one activation drawn apart, whose true shift is 0. It must come out *equivalent* within "
    "the margin on every metric, or every *equivalent* of the forms is reported as *not "
    "established*: a design that cannot find gelu equivalent to itself cannot find two forms "
    "so. Its pairs share no initial draw or batch order, so beside the forms' same-seed pairs it "
    "shows the spread between networks"
  ),
  measures_reason=(
    "each member's test loss in nats a character after its last step, over every character of "
    "the test text (the last 5% of Tiny Shakespeare), the measure a language model is compared "
    "on (Shazeer's held-out log-perplexity); next-character error is not compared"
  ),
  margin_rule=(
    "the smallest of the pilot's candidate margins at which the positive control's pilot gap "
    "(gelu_ffn256 − gelu) lies within 1 to 3 margins, so that the control, if found *different*, "
    "calibrates an *equivalent* at that margin (`gelujax.study.calibration`); where none does, "
    "the largest candidate. Shazeer's gaps are a few hundredths of a nat: a margin below them "
    "holds two forms closer than the orderings the ranking tests"
  ),
  seeds_rule=(
    "the most pairs either family needs, at least the floor and at most the cap: the ranking's "
    "to detect a shift of 1% of gelu's median pilot validation loss with the design's power at "
    "its strictest Holm level (two-sided signed-rank tests: `gelujax.study.transformer."
    "pairs_for_ranking`), the forms' to find a true shift of 0 *equivalent* within the margin "
    "(`gelujax.study.transformer.pairs_for_tost`), both with the SD at the pilot's bound; the "
    "tests the cap leaves short of that power are named"
  ),
  cap_reason=(
    "at most 20 seeds: 9 arms of 20 members at the pilots' pace (about 3 minutes a member on 2 "
    "CPU cores, their timings.json) take about 9 hours, trained over several sessions in the "
    "background"
  ),
  seeds_reason=(
    "fresh seeds from 400, shared by every arm but the negative control (each seed + 100, from "
    "500): none of the pilots' 0–3 (whose validation metrics chose the lrs, the margin and the "
    "seeds), none of any committed result's (the paper tasks' 0–9 and 100–109, the "
    "confirmation's 200–229, the transformer studies' 300–319, the powered forms study's "
    "1000–1059)"
  ),
)
