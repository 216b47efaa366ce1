"""Every committed result re-renders from its runs' files to what is committed.

A copy of the checkout's tracked ``results/`` files and README is rendered in place, each result
by the code path its README's re-render command takes (a study fixed in code through
`gelujax.study.registry`, a paper task through `gelujax.study.render`). Every file of a result
that is not an input of its render must be written again, and every file written is compared with
the checkout's: the same files, the same text, the numbers equal to 1e-9 relative (a last bit of
a NumPy function's SIMD path may differ between CPU kinds; no printed digit can), leaving out the
paper results' "- Written <time> on <machine>" line and the figures' pixels. A change to
`gelujax.study` that changes a committed result fails here until the result is re-rendered and
committed with it (``scripts/rerender_results.py``), its Corrections saying why. Compared with
the working tree: run after re-rendering, it passes before the commit; CI's clean clone compares
with the commit.
"""

import importlib.util
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gelujax import study
from gelujax.study import registry

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
  "rerender_results", ROOT / "scripts" / "rerender_results.py"
)
rerender_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rerender_results)

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# The paper results' line that changes at every render.
WRITTEN = "- Written "
# A result's files its render reads and may leave as they are: what training wrote beside its
# runs, the design it recorded, and the Twitter baselines where the data are not found.
INPUTS = {"timings.json", "trained_with.json", "design.json", "baselines.json"}


def tokens(line: str) -> list:
  """A line as its text between numbers, then its numbers (as floats)."""
  return [*NUMBER.split(line), *(float(v) for v in NUMBER.findall(line))]


def same(a: str, b: str) -> bool:
  """Whether two texts are the same line for line but for numbers equal to 1e-9 relative and
  a "Written" line on both sides."""
  if a == b:
    return True
  lines_a, lines_b = a.splitlines(), b.splitlines()
  if len(lines_a) != len(lines_b):
    return False
  for x, y in zip(lines_a, lines_b, strict=True):
    if x == y or (x.startswith(WRITTEN) and y.startswith(WRITTEN)):
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
  """Renders the result in ``folder`` (under ``root``) as its README's command ``argv`` does,
  having checked that the command names that folder and no setting but its task and dataset."""
  flags = dict(a.removeprefix("--").split("=", 1) for a in argv if a.startswith("--") and "=" in a)
  assert set(flags) <= {"task", "out", "dataset"} and "--render" in argv, argv
  task = flags["task"]
  name = task.split("(", 1)[0]
  relative = folder.relative_to(root)
  assert Path(flags["out"]) == relative if "out" in flags else relative.name == name, argv
  assert flags.get("dataset", relative.parent.name) == relative.parent.name, argv
  if task in registry.STUDIES:
    registry.reproduce(
      registry.STUDIES[task], out=folder, root=root, data_dir=None, train=False,
      command="", project=True,
    )  # fmt: skip
  else:
    study.render(name, out=folder, root=root, project=True)


@pytest.mark.slow
def test_every_committed_result_re_renders_to_its_committed_files(tmp_path):
  found, _ = rerender_results.commands()
  assert len(found) >= 15
  tracked = subprocess.run(
    ["git", "ls-files", "-z", "--", "results", "README.md"],
    cwd=ROOT, capture_output=True, text=True, check=True,
  ).stdout.split("\0")  # fmt: skip
  tracked = {Path(name) for name in tracked if name}
  for name in tracked:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / name, tmp_path / name)
  differ = []
  for folder, argv in found:
    copy = tmp_path / folder.relative_to(ROOT)
    before = {p: p.stat().st_mtime_ns for p in copy.iterdir() if p.is_file()}
    render(tmp_path, copy, argv)
    for path, mtime in before.items():
      if path.name not in INPUTS and path.stat().st_mtime_ns == mtime:
        differ.append(f"{path.relative_to(tmp_path)}: committed, not written by the render")
    for written in sorted(p for p in copy.rglob("*") if p.is_file()):
      name = written.relative_to(tmp_path)
      if name not in tracked:
        differ.append(f"{name}: written, not committed")
      elif written.suffix != ".png" and not same(written.read_text(), (ROOT / name).read_text()):
        differ.append(f"{name}: differs")
  for name in ("README.md", "results/README.md"):
    if not same((tmp_path / name).read_text(), (ROOT / name).read_text()):
      differ.append(f"{name}: differs")
  assert not differ, "Re-render and commit (scripts/rerender_results.py): " + "; ".join(differ)
