"""Several command lines of one of the experiments/ scripts, run in one fresh process.

Each fresh Python that imports JAX and gelujax takes seconds; flags that a script refuses before
any work can be tried many to a process. The script's ``main`` is called once per command line
(its absl flags parsed anew each time), and how each call ended is reported: ``None`` for a
return, or ``SystemExit``'s code (the one line the script prints on stderr when it exits with a
message), with what the call wrote to stderr besides.
"""

import json
import subprocess
import sys

_CHILD = """
import contextlib, importlib.util, io, json, os, sys
from absl import flags
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # as `python script.py` does: its _flags beside it
spec = importlib.util.spec_from_file_location("script", sys.argv[1])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
name = os.path.basename(sys.argv[1])
ended = []
for args in json.loads(sys.argv[2]):
  flags.FLAGS.unparse_flags()
  flags.FLAGS([name, *args])
  err = io.StringIO()
  try:
    with contextlib.redirect_stderr(err):
      script.main([name])
    ended.append([None, err.getvalue()])
  except SystemExit as e:
    ended.append([e.code, err.getvalue()])
print(json.dumps(ended))
"""


def run_mains(
  script: str, command_lines: list[list[str]], env: dict[str, str], cwd: str
) -> list[tuple[str | int | None, str]]:
  """``(exit code or None, other stderr)`` of ``script``'s main called with each command line
  (flags only), in order, in one subprocess with ``env``."""
  done = subprocess.run(
    [sys.executable, "-c", _CHILD, str(script), json.dumps(command_lines)], env=env, cwd=cwd,
    capture_output=True, text=True, timeout=300, check=True,
  )  # fmt: skip
  return [tuple(e) for e in json.loads(done.stdout.strip().splitlines()[-1])]
