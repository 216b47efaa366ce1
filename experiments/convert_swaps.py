"""The one conversion of the forms study's swaps: ``<out>/swaps/<run>.json``, the format
of the results committed before `gelujax.study.wrong_form` kept every study's wrong forms in one
format, into ``<out>/wrong_form/<run>.json`` rows (`gelujax.study.wrong_form.write`).

A swap file held each network's test loss and error with its own form and dtype, then with each
other ``(activation, dtype)``; a row keeps each network's change (the other's minus its own, as
the forms report read it), a change of dtype with ``from_dtype`` its own, a diverged network's
(null) values as NaN, and the statistics the swaps did not measure (the outputs' changes, the
agreement) as NaN. The own evaluation is the run's ``summary.json`` final test loss and error
exactly (checked for every network when this ran), so a swapped value is that plus its change.
The checkpoints are not committed, so the swaps cannot be evaluated again:
this ran once, on results/fashion_mnist/gelu_forms (whose swap files the commit that converted
them removed; git keeps them):

    PYTHONPATH=. python experiments/convert_swaps.py results/fashion_mnist/gelu_forms
"""

import math
import sys
from pathlib import Path

from gelujax import workdir as workdirs
from gelujax.study import wrong_form


def convert(found: dict) -> list[wrong_form.WrongForm]:
  """One run's swap file (``{"members", "evaluations"}``, its own evaluation first) as rows."""
  own, *others = found["evaluations"]
  rows = []
  for other in others:
    networks = []
    for i, member in enumerate(found["members"]):
      pairs = [(other[key][i], own[key][i]) for key in ("error", "loss")]
      diverged = any(None in pair for pair in pairs)
      error, loss = (math.nan if diverged else b - a for b, a in pairs)
      nan = (math.nan,) * 3
      networks.append(
        wrong_form.NetworkCost(member["learning_rate"], member["seed"], diverged, error, loss, *nan)
      )
    from_dtype = own["dtype"] if other["dtype"] != own["dtype"] else None
    summary = wrong_form.summarize(networks)
    rows.append(
      wrong_form.WrongForm(
        own["activation"], other["activation"], other["dtype"], tuple(networks), summary, from_dtype
      )
    )
  return rows


def main(out: Path) -> None:
  for path in sorted((out / "swaps").glob("*.json")):
    rows = convert(workdirs.read_json(path))
    wrong_form.write(wrong_form.kept_path(out, path.stem), rows)
    print(f"{path} -> {wrong_form.kept_path(out, path.stem)}: {len(rows)} rows")


if __name__ == "__main__":
  main(Path(sys.argv[1]))
