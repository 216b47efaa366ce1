"""The study: the paper's experiments from grids of runs to verdicts, one job per module.

- :mod:`~gelujax.study.runs`: reading runs from their files; learning-rate selection and its
  candidates.
- :mod:`~gelujax.study.best`: a member's best evaluation, by a named tie rule (the trainer's,
  the earliest of tied epochs, unless stated), the members whose best ties or is the last epoch.
- :mod:`~gelujax.study.curves`: what a run's curves show (instabilities, still improving,
  final spikes, not learning), by fixed rules.
- :mod:`~gelujax.study.stats`: exact rank-sum and signed-rank tests, Hodges–Lehmann shifts and
  intervals (unpaired and paired), TOST, Holm; :mod:`~gelujax.study.power`: the seeds or pairs a
  decision needs, the shift a design detects (the test's efficiency an argument), and the one
  upper confidence bound of an SD every study sizes its seeds with.
- :mod:`~gelujax.study.registry`: every study fixed in code, by name, and the one way to run one.
- :mod:`~gelujax.study.calibration`: whether an *equivalent* is calibrated (by a control within
  3 margins, or by its own paired differences' sensitivity) and how near its pairs stay to one
  network, for the forms and transformer studies.
- :mod:`~gelujax.study.judge`: the one decision rule every study's verdicts come from (Holm
  within a family, decided below the level, the verdict's word from what was claimed).
- :mod:`~gelujax.study.verdicts`: pre-registered hypotheses (``gelujax.paper.PAPER``)
  judged within their family.
- :mod:`~gelujax.study.evidence`: what each hypothesis is tested on: the runs' per-seed values,
  gathered as the task's design says, with the caveats its verdict carries.
- :mod:`~gelujax.study.analysis`: a result's verdicts, sensitivity and exploratory statistics.
- :mod:`~gelujax.study.findings`: the fixed wording of every statement, a rule per kind of
  line, with :mod:`~gelujax.study.wording` (the words of a verdict and an outcome) and
  :mod:`~gelujax.study.method` (how the verdicts are reached; the design changes).
- :mod:`~gelujax.study.numbers`: how every study prints a number, a signed number, a value
  that is not finite, a percentage, a seed set and an lr.
- :mod:`~gelujax.study.tables`, :mod:`~gelujax.study.plots`, :mod:`~gelujax.study.readme`:
  Markdown tables, figures, READMEs; :mod:`~gelujax.study.overview`: ``results/README.md``, every
  verdict in one table, and the top-level README's summary of it.
- :mod:`~gelujax.study.noise`: Fig. 3's noise evaluation.
- :mod:`~gelujax.study.grids`: the runs to train (selection grids, evaluation runs), training.
- :mod:`~gelujax.study.stages`: a result's stages read from the runs' files (the selection
  grids, their candidates, the evaluation runs, the per-seed values).
- :mod:`~gelujax.study.summary`: ``summary.json``, ``table.md`` and the loss curves.
- :mod:`~gelujax.study.exports`: ``values.csv`` (every per-seed value a result's statistics are
  computed on) and ``verdicts.tex`` (its verdict table as a LaTeX tabular).
- :mod:`~gelujax.study.noise_task`: Fig. 3's result, from the noise evaluations.
- :mod:`~gelujax.study.pipeline`: the orchestration, :func:`reproduce` and :func:`render`.
- :mod:`~gelujax.study.forms`, :mod:`~gelujax.study.forms_report`: the GELU forms study, its
  fixed design, paired tests and swaps; its README, and the study end to end
  (:func:`gelujax.study.forms_report.reproduce`).
  :mod:`~gelujax.study.forms_words` (the words of its verdicts) and
  :mod:`~gelujax.study.forms_corrections` (the facts its corrections state) serve the report.
- :mod:`~gelujax.study.confirm`, :mod:`~gelujax.study.confirm_report`: Twitter POS's primary
  family re-tested on fresh paired seeds (its fixed design, pilot, tie rule and verdicts), and
  its README beside the earlier design's verdict.
- :mod:`~gelujax.study.wrong_form`: what a trained network costs when run with another GELU
  form than it was trained with (the error, the loss, its logits, its top-1 agreement), per
  network and paired over a run's networks, in float32 and bfloat16; every study's rows, the
  forms study's swaps too, kept in its one format (``wrong_form/<run>.json``).
- :mod:`~gelujax.study.pilot`, :mod:`~gelujax.study.pilot_report`: the pilots of the transformer
  study (each feed-forward activation on selection seeds, validation metrics alone: each arm's
  lr, the paired spread between arms, the pairs candidate margins need), and their README.
- :mod:`~gelujax.study.transformer`, :mod:`~gelujax.study.transformer_report`: the transformer
  study (feed-forward activations on fresh paired seeds: ranking, forms and control families,
  its lrs, margins and seeds taken from the pilot's result by a fixed rule, each network's wrong
  form), and its README, with :mod:`~gelujax.study.transformer_verdicts` (its verdicts
  section) and :mod:`~gelujax.study.transformer_design` (its Design section).
"""

from gelujax.study.grids import Grid, evaluation_grids, make_grids, train_grids
from gelujax.study.pipeline import render, reproduce

__all__ = ["Grid", "evaluation_grids", "make_grids", "render", "reproduce", "train_grids"]
