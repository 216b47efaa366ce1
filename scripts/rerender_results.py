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

Exits 1 if a render fails or anything changed or was added; 2, touching nothing, where
``results/`` or ``README.md`` already has changes not committed (commit or stash them first).
Results without such a command (the nanoGPT anchors, written by ``scripts/char_lm_anchor.py``;
``twitter_pos/trial``) are listed as skipped.
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


def git(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def main(argv: list[str]) -> int:
  paths = ("--", "results", "README.md")
  if git("status", "--porcelain", "--untracked-files=all", *paths).stdout:
    print(
      "results/ or README.md has changes not committed: commit or stash them first, so that "
      "what this prints is the renders' doing and nothing of yours is put back."
    )
    return 2
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
  for readme in filter(None, git("diff", "--name-only", "-z", "--", "results").stdout.split("\0")):
    if git("diff", "--quiet", "-I", "^- Written ", "--", readme).returncode == 0:
      git("checkout", "--", readme)
  changed = git("diff", "--stat", "-I", "^- Written ", *paths).stdout
  new = git("ls-files", "--others", "--exclude-standard", *paths).stdout
  print(changed + (f"Written, not committed:\n{new}" if new else "") or "No result changed.")
  return 1 if failed or changed or new else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
