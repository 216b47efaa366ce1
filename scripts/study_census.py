"""What the lines of a package are: code, docstrings, lines of string literals alone, comments
and blank lines, file by file and in all.

  python scripts/study_census.py                 # gelujax/study
  python scripts/study_census.py gelujax/engine

A line is a docstring's where it lies in a module's, class's or function's docstring; string-only
where every token on it is a string (the text of a README or a design's reasons, rendered word
for word); code where it has any other token. The largest files come first.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("code", "docstring", "string", "comment", "blank")
FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
SKIPPED = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def census(source: str) -> dict[str, int]:
  """How many of ``source``'s lines are of each of :data:`KINDS`."""
  lines = source.splitlines()
  kind = ["blank" if not line.strip() else "code" for line in lines]
  for node in ast.walk(ast.parse(source)):
    body = getattr(node, "body", None)
    if (
      isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
      and body
      and isinstance(body[0], ast.Expr)
      and isinstance(body[0].value, ast.Constant)
      and isinstance(body[0].value.value, str)
    ):
      for i in range(body[0].lineno - 1, body[0].end_lineno):
        kind[i] = "docstring"
  tokens: dict[int, set[str]] = {}
  depth = 0  # inside an f-string, which Python 3.12 splits into tokens, 3.11 does not
  for t in tokenize.generate_tokens(io.StringIO(source).readline):
    depth += (t.type == FSTRING_START) - (t.type == FSTRING_END)
    if t.type in SKIPPED:
      continue
    what = {tokenize.STRING: "string", tokenize.COMMENT: "comment"}.get(t.type, "code")
    if depth or t.type == FSTRING_END:
      what = "string"
    elif t.type == tokenize.OP and t.string in "()[],+":
      what = "punctuation"
    for line in range(t.start[0], t.end[0] + 1):
      tokens.setdefault(line, set()).add(what)
  for line, found in tokens.items():
    if kind[line - 1] != "code":
      continue
    if found <= {"comment"}:
      kind[line - 1] = "comment"
    elif "string" in found and found <= {"string", "punctuation", "comment"}:
      kind[line - 1] = "string"
  return {k: kind.count(k) for k in KINDS}


def main(argv: list[str]) -> None:
  folder = ROOT / (argv[1] if len(argv) > 1 else "gelujax/study")
  rows = {p.relative_to(ROOT): census(p.read_text()) for p in sorted(folder.rglob("*.py"))}
  total = {k: sum(r[k] for r in rows.values()) for k in KINDS}
  print(f"| file | lines | {' | '.join(KINDS)} |")
  print("|---|" + "---:|" * (len(KINDS) + 1))
  for name, r in sorted(rows.items(), key=lambda item: -sum(item[1].values())):
    print(f"| {name} | {sum(r.values())} | {' | '.join(str(r[k]) for k in KINDS)} |")
  print(f"| all {len(rows)} | {sum(total.values())} | {' | '.join(str(total[k]) for k in KINDS)} |")


if __name__ == "__main__":
  main(sys.argv)
