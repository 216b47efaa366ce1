"""Several command lines of one of the experiments/ scripts, run in one fresh process.

Each fresh Python that imports JAX and gelujax takes seconds; flags that a script refuses before
any work can be tried many to a process, and so can command lines that follow one another on
the same files. The script's ``main`` is called once per command line (its absl flags parsed
anew each time), and how each call ended is reported: ``None`` for a return, or
``SystemExit``'s code (the one line the script prints on stderr when it exits with a message),
with what the call wrote to stderr and stdout besides, and the bytes of the files asked for as
they were right after the call (files a later call may change).
"""

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

_CHILD = """
import base64, contextlib, importlib.util, io, json, os, sys
from absl import flags
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # as `python script.py` does
spec = importlib.util.spec_from_file_location("script", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
name = os.path.basename(sys.argv[1])
read_after = json.loads(sys.argv[3])


def contents():
  return {
    p: base64.b64encode(open(p, "rb").read()).decode() if os.path.exists(p) else None
    for p in read_after
  }


ended = []
for args in json.loads(sys.argv[2]):
  flags.FLAGS.unparse_flags()
  flags.FLAGS([name, *args])
  err, out = io.StringIO(), io.StringIO()
  try:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
      script.main([name])
    code = None
  except SystemExit as e:
    code = e.code
  ended.append([code, err.getvalue(), out.getvalue(), contents()])
print(json.dumps(ended))
"""


class Ended(NamedTuple):
  """How one call of a script's main ended."""

  code: str | int | None  # None: it returned; else SystemExit's code
  stderr: str  # besides the exit message
  stdout: str
  files: dict[Path, bytes | None]  # each of ``read_after``'s bytes after the call (None: absent)


def run_mains(
  script: str,
  command_lines: list[list[str]],
  env: dict[str, str],
  cwd: str,
  read_after: tuple[Path | str, ...] = (),
) -> list[Ended]:
  """How ``script``'s main ended, called with each command line (flags only) in order, in one
  subprocess with ``env``; with the bytes of each file of ``read_after`` after each call."""
  done = subprocess.run(
    [sys.executable, "-c", _CHILD, str(script), json.dumps(command_lines),
     json.dumps([str(p) for p in read_after])],
    env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-3000:]
  ended = [Ended(*e) for e in json.loads(done.stdout.strip().splitlines()[-1])]
  return [
    e._replace(
      files={Path(p): None if b is None else base64.b64decode(b) for p, b in e.files.items()}
    )
    for e in ended
  ]
