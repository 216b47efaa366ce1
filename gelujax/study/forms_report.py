"""The README, tables, figure and summary of the GELU forms study (:mod:`gelujax.study.forms`),
from the runs' files alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gelujax import workdir as workdirs
from gelujax.study import forms


def write_result(design: forms.Design, *, out: Path, root: Path) -> Path:
  """Writes ``out/summary.json`` (every comparison's outcome) and returns ``out``."""
  outcomes, missing = forms.analyse(design, out)
  workdirs.write_json(
    out / "summary.json",
    {"missing": missing, "outcomes": [dataclasses.asdict(o) for o in outcomes]},
  )
  return out
