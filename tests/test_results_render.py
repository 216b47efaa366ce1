"""Every committed result re-renders from its runs' files to what is committed.

A copy of ``results/`` and the README is rendered in place, each result by the code path its
README's re-render command takes (a study fixed in code through `gelujax.study.registry`, a
paper task through `gelujax.study.render`), and every file written is compared with the
checkout's: the same files, the same text, the numbers equal to 1e-9 relative (a last bit of a
NumPy function's SIMD path may differ between CPU kinds; no printed digit can), leaving out the
paper results' "- Written <time> on <machine>" line and the figures' pixels. A change to
`gelujax.study` that changes a committed result fails here until the result is re-rendered and
committed with it (``scripts/rerender_results.py``), its Corrections saying why.
"""

import math
import re
import shutil
from pathlib import Path

import pytest

from gelujax import study
from gelujax.study import registry
from scripts.rerender_results import commands

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# The paper results' line that changes at every render.
WRITTEN = "- Written "


def tokens(line: str) -> list:
  """A line as its text between numbers and its numbers (as floats)."""
  parts = NUMBER.split(line)
  values = [float(v) for v in NUMBER.findall(line)]
  return [*parts, *values]


def same(a: str, b: str) -> bool:
  """Whether two texts are the same but for numbers equal to 1e-9 relative."""
  if a == b:
    return True
  lines_a = [x for x in a.splitlines() if not x.startswith(WRITTEN)]
  lines_b = [x for x in b.splitlines() if not x.startswith(WRITTEN)]
  if len(lines_a) != len(lines_b):
    return False
  for x, y in zip(lines_a, lines_b, strict=True):
    if x == y:
      continue
    tx, ty = tokens(x), tokens(y)
    if len(tx) != len(ty):
      return False
    for u, v in zip(tx, ty, strict=True):
      if isinstance(u, float):
        if not math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-300):
          return False
      elif u != v:
        return False
  return True


def render(root: Path, folder: Path, argv: list[str]) -> None:
  """Renders the result in ``folder`` (under ``root``) as its README's command ``argv`` does."""
  flags = dict(a.removeprefix("--").split("=", 1) for a in argv if a.startswith("--") and "=" in a)
  task = flags["task"]
  if task in registry.STUDIES:
    registry.reproduce(
      registry.STUDIES[task], out=folder, root=root, data_dir=None, train=False,
      command="", project=True,
    )  # fmt: skip
  else:
    study.render(task.split("(", 1)[0], out=folder, root=root, project=True)


@pytest.mark.slow
def test_every_committed_result_re_renders_to_its_committed_files(tmp_path):
  found, _ = commands()
  assert len(found) >= 15
  shutil.copytree(ROOT / "results", tmp_path / "results")
  shutil.copy(ROOT / "README.md", tmp_path / "README.md")
  differ = []
  for folder, argv in found:
    copy = tmp_path / folder.relative_to(ROOT)
    render(tmp_path, copy, argv)
    for written in sorted(p for p in copy.rglob("*") if p.is_file()):
      name = written.relative_to(tmp_path)
      committed = ROOT / name
      if not committed.exists():
        differ.append(f"{name}: written, not committed")
      elif written.suffix != ".png" and not same(written.read_text(), committed.read_text()):
        differ.append(f"{name}: differs")
  for name in ("README.md", "results/README.md"):
    if not same((tmp_path / name).read_text(), (ROOT / name).read_text()):
      differ.append(f"{name}: differs")
  assert not differ, "Re-render and commit (scripts/rerender_results.py): " + "; ".join(differ)
