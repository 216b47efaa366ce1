r"""Chooses Twitter POS's substitute for the paper's unavailable pretrained embeddings.

The paper's 50-d tweet embeddings cannot be retrieved, so gelujax offers two substitutes: a
frozen random N(0, 1) table (the task as registered) and a trainable one
(``model='embedding_mlp_twitter_pos', preprocessing=()``). The trial trains one gelu_tanh grid
of each (the task's lrs, selection seeds 0..4, 30 epochs):

  python experiments/train.py --task=twitter_pos --activation=gelu_tanh \
    --workdir=results/twitter_pos/trial/frozen_random
  python experiments/train.py \
    --task="twitter_pos(model='embedding_mlp_twitter_pos', preprocessing=())" \
    --activation=gelu_tanh --workdir=results/twitter_pos/trial/trainable_random
  python scripts/twitter_trial.py

The rule, fixed before the trial ran: the substitute whose selected lr has the lower median
best-validation error wins (validation only: the test split is not looked at to choose); a tie
keeps the frozen table, the task's default. The script writes
``results/twitter_pos/trial/README.md`` and prints the choice.
"""

import sys
from pathlib import Path

from gelujax.study import runs

ROOT = Path(__file__).resolve().parent.parent
TRIAL = ROOT / "results" / "twitter_pos" / "trial"
SUBSTITUTES = {
  "frozen_random": "--task=twitter_pos",
  "trainable_random": "--task=\"twitter_pos(model='embedding_mlp_twitter_pos', preprocessing=())\"",
}


def main() -> None:
  rows = {}
  for name in SUBSTITUTES:
    try:
      run = runs.load_run(TRIAL / name)
    except ValueError as e:
      sys.exit(f"twitter_trial.py: {TRIAL / name} is not a finished trial run: {e}")
    rows[name] = runs.summarize_run(run)
  lines = [
    "# Twitter POS: which substitute for the paper's pretrained embeddings\n",
    "Written by `python scripts/twitter_trial.py` from the two trial runs below (gelu_tanh, "
    "the task's lrs, selection seeds 0..4, 30 epochs, the ARK Oct27 splits). Rule, fixed "
    "before the trial: the lower median best-validation error at the selected lr wins; a tie "
    "keeps the frozen table (the task's default). The test split is not used to choose.\n",
    "| substitute | flag | lr | median best validation error (%) | per seed (%) |",
    "|---|---|---|---|---|",
  ]
  medians = {}
  for name, row in rows.items():
    for entry in row["grid"]:
      values = [100 * v for v in entry["select_values"] if v is not None]
      mark = " (selected)" if entry is row["selected"] else ""
      lines.append(
        f"| {name} | `{SUBSTITUTES[name]}` | {entry['learning_rate']:g}{mark} | "
        f"{100 * entry['select_median']:.2f} | {', '.join(f'{v:.2f}' for v in values)} |"
      )
    medians[name] = row["selected"]["select_median"] if row["selected"] else float("inf")
  chosen = min(medians, key=lambda n: (medians[n], n != "frozen_random"))
  lines += [
    "",
    f"**Chosen: {chosen}** (median best validation error "
    f"{100 * medians[chosen]:.2f}% at its selected lr, against "
    + ", ".join(f"{100 * v:.2f}% for {n}" for n, v in medians.items() if n != chosen)
    + "). The study in `../` trains every activation with it.",
  ]
  (TRIAL / "README.md").write_text("\n".join(lines) + "\n")
  print(f"chosen: {chosen} ({SUBSTITUTES[chosen]}); wrote {TRIAL / 'README.md'}")


if __name__ == "__main__":
  main()
