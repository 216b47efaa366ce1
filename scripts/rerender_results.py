"""Re-render every committed result from its runs' files and show what changed.

Each ``results/<dataset>/<name>/README.md`` names the command that re-renders it (the line with
``experiments/reproduce.py`` and ``--render``); this runs each one, one at a time, from the
checkout's root, then prints ``git diff --stat`` of ``results/`` and ``README.md``, leaving out the
paper results' "- Written <time> on <machine>" line, which changes at every render (a README
whose only change is that line is put back as committed). An empty diff
means every result re-renders byte for byte: the check a change to ``gelujax/study`` owes before
it is committed.

  python scripts/rerender_results.py            # every result
  python scripts/rerender_results.py char_lm    # those whose folder name contains "char_lm"

Exits 1 if a render fails or anything changed. Results without such a command (the nanoGPT
anchors, written by ``scripts/char_lm_anchor.py``; ``twitter_pos/trial``) are listed as skipped.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = re.compile(r"python experiments/reproduce\.py [^`\n]*--render[^`\n]*")


def commands(part: str = "") -> tuple[list[tuple[Path, list[str]]], list[Path]]:
  """Each result's re-render command (as argv), and the results that state none."""
  found, skipped = [], []
  for readme in sorted(ROOT.glob("results/*/*/README.md")):
    if part not in readme.parent.name:
      continue
    match = COMMAND.search(readme.read_text())
    if match is None:
      skipped.append(readme.parent)
    else:
      found.append((readme.parent, [sys.executable, *shlex.split(match.group(0))[1:]]))
  return found, skipped


def main(argv: list[str]) -> int:
  found, skipped = commands(argv[1] if len(argv) > 1 else "")
  failed = []
  for folder, argv_ in found:
    start = time.monotonic()
    done = subprocess.run(argv_, cwd=ROOT, capture_output=True, text=True)
    name = folder.relative_to(ROOT)
    state = "ok" if done.returncode == 0 else "FAILED"
    print(f"{name}: {state} in {time.monotonic() - start:.0f} s")
    if done.returncode:
      failed.append(name)
      print(done.stderr[-3000:])
  for folder in skipped:
    print(f"{folder.relative_to(ROOT)}: skipped (its README names no re-render command)")
  # A README whose only change is its "Written" line is put back as committed.
  for readme in subprocess.run(
    ["git", "diff", "--name-only", "--", "results"], cwd=ROOT, capture_output=True, text=True
  ).stdout.split():
    quiet = ["git", "diff", "--quiet", "-I", "^- Written ", "--", readme]
    if subprocess.run(quiet, cwd=ROOT).returncode == 0:
      subprocess.run(["git", "checkout", "--", readme], cwd=ROOT, check=True)
  diff = subprocess.run(
    ["git", "diff", "--stat", "-I", "^- Written ", "--", "results", "README.md"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  print(diff or "No result changed.")
  return 1 if failed or diff else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
