r"""Fault injection: every way found to lose or mix a workdir's results, caused the real way.

  python benchmarks/faults.py [--output-dir DIR] [--only NAME ...]

Each fault is done to real `experiments/train.py` processes training ``tiny_mnist`` on MNIST
files in the real IDX format that this script writes: a second process on the same workdir,
``kill -9`` during a checkpoint's save and during an epoch, real signals sent during a save
and outside one, bytes flipped, cut or deleted in the files on disk (metrics.jsonl's records,
the checkpoints, the compilation cache's entries), a full disk (a small tmpfs, mounted for the
purpose: needs root, as CI has), a read-only disk, a folder the process may not write (root
without its capabilities, through ``setpriv``), flags that cannot be used and malformed input
files. For each, the table gives what the user sees (the command's stderr less its progress
bar, and its exit status) and whether that is the promised behaviour (checked by the code
below, never by hand; where a run goes on, against the bytes of an uninterrupted run). Writes
``faults.md`` and ``faults.json`` to ``benchmarks/results/`` (or ``--output-dir``).

`tests/test_faults.py` and `tests/test_faults_on_disk.py` run the same faults and check each
promise again on their own.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import functools
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from tiny_task import hash_tree, write_mnist_files  # noqa: E402

from gelujax.host import describe_machine  # noqa: E402

TRAIN = ROOT / "experiments" / "train.py"
TASK = "--task=tiny_mnist(data_options={'validation_size': 32})"
GRID = ("--seeds=2", "--learning_rates=1e-3")
RESULTS = Path(__file__).parent / "results"


# The progress bar's lines, "epoch 2/2:  50%|#####     | 3/6 [...]" (tqdm's, headed by the
# epoch), or the one line a run with every epoch trained prints in its stead.
_PROGRESS = re.compile(
  r"^(epoch \d+/\d+: )?\s*\d+%\||^gelujax: .* already trained \d+ of \d+ epochs; nothing to "
  r"train\.$"
)
# The lines every run starts with, naming its data's source, and where its members lie and how a
# device takes them: the same whatever the fault.
_DATA_SOURCE = re.compile(r"^gelujax: data |^gelujax: \d+ members? on a mesh of ")


@dataclasses.dataclass
class Run:
  """A finished command: its exit status and what it printed."""

  returncode: int
  stderr: str
  stdout: str = ""
  max_rss: int = 0  # peak resident memory, bytes

  @property
  def seen(self) -> list[str]:
    """The stderr lines a user reads, less the progress bar's (or the line that stands for it
    where nothing is left to train), the data source's and the layout's."""
    return [
      line
      for line in self.stderr.splitlines()
      if line.strip() and not _PROGRESS.match(line) and not _DATA_SOURCE.match(line)
    ]


@dataclasses.dataclass
class Outcome:
  """One fault tried: how it was caused, what the user saw, and whether it is as promised."""

  fault: str
  caused_by: str
  seen: str
  ok: bool
  expected: str
  # The workdir the fault was done to and the uninterrupted run it must end equal to (if any),
  # for tests that check the promise on their own; not part of the report.
  workdir: Path | None = dataclasses.field(default=None, repr=False)
  reference: Path | None = dataclasses.field(default=None, repr=False)

  def report(self) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("workdir", "reference")}

  def row(self) -> str:
    seen = self.seen.replace("|", "\\|").replace("\n", " / ")
    return f"| {self.fault} | {self.caused_by} | {seen} | {'yes' if self.ok else '**NO**'} |"


_EXEC_IGNORING_SIGINT = (
  "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
  "os.execv(sys.argv[1], sys.argv[1:])"
)


class Lab:
  """MNIST-format fixture files, finished reference runs and the commands of the faults."""

  def __init__(self, root: Path):
    self.root = root
    self.data_dir = root / "mnist"
    # Every run of the lab compiles into a cache of its own (never the user's): the runs after
    # the first start at once.
    self.cache = root / "jax-cache"
    write_mnist_files(str(self.data_dir))
    self._references: dict[tuple, Path] = {}

  def command(self, workdir: Path, *flags: str, task: str = TASK, grid=GRID) -> list[str]:
    """train.py's command line: the lab's defaults, less those ``flags`` give again (a flag
    given twice is refused)."""
    given = {flag.split("=")[0] for flag in flags}
    defaults = [f"--data_dir={self.data_dir}", f"--workdir={workdir}",
                f"--compilation_cache={self.cache}", *grid]  # fmt: skip
    kept = [flag for flag in defaults if flag.split("=")[0] not in given]
    return [sys.executable, str(TRAIN), task, *kept, *flags]

  @staticmethod
  def env(**extra: str) -> dict[str, str]:
    return dict(
      os.environ,
      PYTHONPATH=str(ROOT),
      JAX_PLATFORMS="cpu",
      XLA_FLAGS="--xla_force_host_platform_device_count=1",
      **extra,
    )

  def train(self, workdir: Path, *flags: str, prefix=(), env=None, **options) -> Run:
    """Runs train.py to the end; ``prefix`` goes before the command (e.g. setpriv)."""
    return run([*prefix, *self.command(workdir, *flags, **options)], env or self.env())

  def start(
    self, workdir: Path, *flags: str, ignore_sigint: bool = False, **options
  ) -> subprocess.Popen:
    """train.py started in the background; ``ignore_sigint``: with SIGINT ignored, as a
    non-interactive shell starts ``cmd &`` (a Python that ignores it, then execs train.py: an
    ignored signal stays ignored across exec)."""
    command = self.command(workdir, *flags, **options)
    if ignore_sigint:
      command = [sys.executable, "-c", _EXEC_IGNORING_SIGINT, *command]
    # SIGINT reaches it as from an interactive shell: `main` (and the tests' conftest) restore
    # it where this process was started with it ignored.
    return subprocess.Popen(
      command, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

  def reference(self, epochs: int, *flags: str, **options) -> Path:
    """A finished, uninterrupted run of ``epochs`` (made once); ``options`` as for `command`."""
    key = (epochs, flags, tuple(sorted(options.items())))
    if key not in self._references:
      workdir = self.root / f"reference-{epochs}-{len(self._references)}"
      result = self.train(workdir, f"--epochs={epochs}", *flags, **options)
      if result.returncode:
        raise RuntimeError(f"The reference run failed:\n{result.stderr}")
      self._references[key] = workdir
    return self._references[key]

  def copy(self, epochs: int, name: str) -> Path:
    """A copy of the finished reference run of ``epochs``."""
    workdir = self.root / name
    shutil.copytree(self.reference(epochs), workdir, ignore=shutil.ignore_patterns("lock"))
    return workdir


def run(command: list[str], env: dict[str, str], timeout: float = 300) -> Run:
  """Runs ``command``, measuring its peak memory (ru_maxrss of this one child)."""
  with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
    process = subprocess.Popen(command, env=env, stdout=out, stderr=err, text=True)
    deadline = time.monotonic() + timeout
    while True:
      pid, status, usage = os.wait4(process.pid, os.WNOHANG)
      if pid:
        break
      if time.monotonic() > deadline:
        process.kill()
        pid, status, usage = os.wait4(process.pid, 0)
        break
      time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    return Run(process.returncode, err.read(), out.read(), usage.ru_maxrss * 1024)


def results(workdir: Path) -> dict[str, str]:
  """Each file of the workdir -> its hash and mtime, less the lock file (which a refused
  process may create: it holds only the pid of the last process that opened the workdir)."""
  return {k: v for k, v in hash_tree(str(workdir)).items() if not k.endswith("/lock")}


def metrics_text(workdir: Path) -> str:
  return (workdir / "metrics.jsonl").read_text()


def same_results(workdir: Path, reference: Path) -> bool:
  """metrics.jsonl and summary.json byte for byte as the uninterrupted run's."""
  return all(
    (workdir / name).read_text() == (reference / name).read_text()
    for name in ("metrics.jsonl", "summary.json")
  )


def one_line(result: Run, needle: str) -> bool:
  """A refusal as promised: exit 1, one line that starts 'train.py: error:' and says ``needle``."""
  return (
    result.returncode == 1
    and len(result.seen) == 1
    and result.seen[0].startswith("train.py: error: ")
    and needle in result.seen[0]
  )


def user_saw(result: Run) -> str:
  lines = result.seen or ["(nothing)"]
  return f"exit {result.returncode}: " + " / ".join(lines)


# ------------------------------------------------------------------------ real faults


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *options: str) -> Iterator[Path]:
  """A tmpfs of ``size`` mounted at ``path`` (a real small disk; needs root)."""
  path.mkdir(parents=True, exist_ok=True)
  subprocess.run(
    ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path)],
    check=True,
    capture_output=True,
  )
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def remount(path: Path, *options: str) -> None:
  subprocess.run(
    ["mount", "-o", ",".join(["remount", *options]), str(path)], check=True, capture_output=True
  )


def can_mount() -> bool:
  """Whether this process may mount a tmpfs (root, or CAP_SYS_ADMIN)."""
  with tempfile.TemporaryDirectory() as directory:
    try:
      with tmpfs(Path(directory), "64k"):
        return True
    except subprocess.CalledProcessError:
      return False


def fill_disk(folder: Path) -> Path:
  """Writes a file in ``folder`` until its disk is full; returns the file."""
  filler = folder / "filler"
  with open(filler, "wb", buffering=0) as f:  # unbuffered: closing has nothing left to write
    with contextlib.suppress(OSError):
      while f.write(b"\0" * 4096):
        pass
  return filler


def flip_byte(path: str | Path, offset: int | None = None) -> None:
  """Flips the bits of one byte of a file on disk (its middle by default)."""
  data = bytearray(Path(path).read_bytes())
  offset = len(data) // 2 if offset is None else offset
  data[offset] ^= 0x40
  Path(path).write_bytes(bytes(data))


def checkpoint_data(workdir: Path, epoch: int) -> str:
  """The largest file of a checkpoint's array data (Orbax/TensorStore chunks)."""
  files = glob.glob(str(workdir / "checkpoints" / str(epoch) / "default" / "**" / "d" / "*"))
  return max(files, key=os.path.getsize)


def wait_for(condition: Callable[[], bool], timeout: float = 120, poll: float = 0.01) -> bool:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if condition():
      return True
    time.sleep(poll)
  return False


# -------------------------------------------------------------------------- the faults


def second_writer(lab: Lab) -> list[Outcome]:
  """Two processes on one --workdir; then kill -9 of the holder and the same command again.

  The holder is stopped (SIGSTOP) once it holds the lock: alive, as a training process is, for
  as long as the second takes to start and be refused, however slow the machine, without a
  run long enough to outlast it."""
  workdir = lab.root / "two-writers"
  first = lab.start(workdir, "--epochs=20", "--checkpoint_every=5")
  lock = workdir / "lock"
  wait_for(lambda: lock.exists() and lock.read_text().startswith(f"{first.pid} "))
  first.send_signal(signal.SIGSTOP)
  second = lab.train(workdir, "--epochs=20", "--checkpoint_every=5")
  first_running = first.poll() is None
  first.kill()  # kill -9
  first.communicate()
  outcomes = [
    Outcome(
      "two processes on one --workdir",
      "a second `train.py` started on the workdir of one that holds it (stopped by SIGSTOP)",
      user_saw(second),
      first_running and one_line(second, f"in use by process {first.pid} on host"),
      "the second is refused in one line naming the holder's pid and host",
    )
  ]
  again = lab.train(workdir, "--epochs=20", "--checkpoint_every=5")
  epochs = [json.loads(line)["epoch"] for line in metrics_text(workdir).splitlines()]
  outcomes.append(
    Outcome(
      "stale lock of a killed run",
      "`kill -9` of the training process, then the same command",
      user_saw(again),
      again.returncode == 0 and epochs == sorted(e for e in range(1, 21) for _ in range(2)),
      "the lock of a dead process does not block; the run resumes, each epoch logged once",
      workdir,
    )
  )
  return outcomes


def config_deleted(lab: Lab) -> list[Outcome]:
  """config.json deleted, then another grid, then the same grid again."""
  workdir = lab.copy(1, "config-deleted")
  (workdir / "config.json").unlink()
  before = results(workdir)
  other = lab.train(workdir, "--epochs=2", grid=("--seeds=5,6", "--learning_rates=0.01"))
  outcomes = [
    Outcome(
      "config.json deleted, another grid started",
      "`rm config.json`, then `train.py --seeds=5,6 --learning_rates=0.01` on the workdir",
      user_saw(other),
      one_line(other, "holds another run") and results(workdir) == before,
      "refused: the checkpoints record the run; nothing changes",
    )
  ]
  same = lab.train(workdir, "--epochs=2")
  outcomes.append(
    Outcome(
      "config.json deleted, same grid resumed",
      "`rm config.json`, then the run's own command with --epochs=2",
      user_saw(same),
      same.returncode == 0
      and (workdir / "config.json").exists()
      and same_results(workdir, lab.reference(2)),
      "config.json rebuilt from the checkpoint; the run resumes to the uninterrupted result",
    )
  )
  return outcomes


def config_empty(lab: Lab) -> list[Outcome]:
  """config.json holding {} with and without a checkpoint to rebuild it from."""
  workdir = lab.copy(1, "config-empty")
  (workdir / "config.json").write_text("{}")
  resumed = lab.train(workdir, "--epochs=2")
  outcomes = [
    Outcome(
      "config.json holding `{}`",
      "`echo {} > config.json` in a workdir with checkpoints, then the run's command",
      user_saw(resumed),
      resumed.returncode == 0
      and (workdir / "config.json.damaged").read_text() == "{}"
      and same_results(workdir, lab.reference(2)),
      "kept as config.json.damaged, rebuilt from the checkpoint, resumed",
    )
  ]
  bare = lab.root / "config-empty-bare"
  bare.mkdir()
  (bare / "config.json").write_text("{}")
  refused = lab.train(bare, "--epochs=2")
  outcomes.append(
    Outcome(
      "config.json holding `{}`, no checkpoint",
      "`echo {} > config.json` in an otherwise empty workdir, then a run",
      user_saw(refused),
      one_line(refused, "config.json is not a run's config")
      and sorted(os.listdir(bare)) == ["config.json"],
      "one line naming the file; nothing written",
    )
  )
  return outcomes


def flipped_bytes(lab: Lab) -> list[Outcome]:
  """A byte flipped in the newest checkpoint; then in every checkpoint."""
  workdir = lab.copy(3, "flipped-newest")
  flip_byte(checkpoint_data(workdir, 3))
  resumed = lab.train(workdir, "--epochs=3")
  outcomes = [
    Outcome(
      "a byte flipped in the newest checkpoint",
      "one byte of checkpoint 3's array data flipped on disk, then the run's command",
      user_saw(resumed),
      resumed.returncode == 0
      and len(resumed.seen) == 1
      # Either check may find it, as the chunk's bytes fall (tests/test_train_cli.py).
      and ("do not match the checksums" in resumed.seen[0] or "cannot be read" in resumed.seen[0])
      and (workdir / "damaged" / "checkpoint-3").is_dir()
      and same_results(workdir, lab.reference(3)),
      "one warning line; checkpoint 3 moved to damaged/, epoch 3 retrained from checkpoint 2",
    )
  ]
  workdir = lab.copy(3, "flipped-all")
  for epoch in (2, 3):
    flip_byte(checkpoint_data(workdir, epoch))
  before = results(workdir)
  refused = lab.train(workdir, "--epochs=4")
  outcomes.append(
    Outcome(
      "a byte flipped in every checkpoint",
      "one byte flipped in checkpoints 2 and 3, then `--epochs=4`",
      user_saw(refused),
      one_line(refused, "No checkpoint in")
      and "never does by itself" in refused.seen[0]
      and results(workdir) == before,
      "refused in one line (no silent restart from epoch 0); nothing changes",
    )
  )
  return outcomes


def torn_metrics(lab: Lab) -> list[Outcome]:
  """A torn last line in metrics.jsonl, written by an append on a full disk."""
  with tmpfs(lab.root / "torn-disk", "4m") as disk:
    workdir = disk / "run"
    shutil.copytree(lab.reference(2), workdir, ignore=shutil.ignore_patterns("lock"))
    filler = fill_disk(disk)
    record = metrics_text(workdir).splitlines()[-1].replace('"epoch": 2.0', '"epoch": 3.0')
    try:
      with open(workdir / "metrics.jsonl", "a") as f:  # What the writer does, on a full disk.
        for _ in range(100):
          f.write(record + "\n")
          f.flush()
    except OSError:
      pass
    torn = not metrics_text(workdir).endswith("\n")
    filler.unlink()
    resumed = lab.train(workdir, "--epochs=3")
    ok = torn and resumed.returncode == 0 and same_results(workdir, lab.reference(3))
  return [
    Outcome(
      "a torn last line in metrics.jsonl",
      "records appended to metrics.jsonl on a full tmpfs until the write failed mid-line, then "
      "space freed and `--epochs=3`",
      user_saw(resumed),
      ok,
      "the torn line is dropped and rewritten; the result equals the uninterrupted run's",
    )
  ]


def rewritten_from_checkpoint(result: Run, workdir: Path, reference: Path, damaged: str) -> bool:
  """A resume that found metrics.jsonl damaged before its checkpoint, as promised: exit 0, one
  line saying so, the damaged file kept as it was, and the run's results equal to the
  uninterrupted ``reference``'s."""
  kept = workdir / "metrics.jsonl.damaged"
  return (
    result.returncode == 0
    and len(result.seen) == 1
    and "rewritten from the checkpoint of epoch" in result.seen[0]
    and kept.exists()
    and kept.read_text() == damaged
    and same_results(workdir, reference)
  )


def malformed_metrics(lab: Lab) -> list[Outcome]:
  workdir = lab.copy(2, "malformed-metrics")
  lines = metrics_text(workdir).splitlines()
  lines[1] = lines[1][:40]
  damaged = "\n".join(lines) + "\n"
  (workdir / "metrics.jsonl").write_text(damaged)
  resumed = lab.train(workdir, "--epochs=2")
  return [
    Outcome(
      "a malformed line inside metrics.jsonl",
      "line 2 of metrics.jsonl cut short on disk, then the same command",
      user_saw(resumed),
      rewritten_from_checkpoint(resumed, workdir, lab.reference(2), damaged)
      and "delete" not in resumed.seen[0],
      "one line naming the line; the file kept as metrics.jsonl.damaged and rewritten from the "
      "checkpoint, which holds the records; the result equals the uninterrupted run's",
      workdir,
      lab.reference(2),
    )
  ]


def torn_tail(lab: Lab, cuts: tuple[int, ...] = (40, 150, 400)) -> list[Outcome]:
  """The last bytes of metrics.jsonl cut after epoch 1 (into member 1's record, more of it, and
  into member 0's), then the run extended to epoch 2."""
  outcomes = []
  for cut in cuts:
    workdir = lab.copy(1, f"torn-tail-{cut}")
    damaged = metrics_text(workdir)[:-cut]
    (workdir / "metrics.jsonl").write_text(damaged)
    resumed = lab.train(workdir, "--epochs=2")
    outcomes.append(
      Outcome(
        f"the last {cut} bytes of metrics.jsonl cut",
        f"`truncate -s -{cut} metrics.jsonl` after epoch 1 (2 records, "
        f"{len(damaged) + cut} bytes), then `--epochs=2`",
        user_saw(resumed),
        rewritten_from_checkpoint(resumed, workdir, lab.reference(2), damaged),
        "the records of epoch 1 rewritten from its checkpoint (one line; the cut file kept); "
        "the result equals the uninterrupted run's",
        workdir,
        lab.reference(2),
      )
    )
  return outcomes


def deleted_line(lab: Lab, stopped_at: tuple[int, ...] = (10, 2)) -> list[Outcome]:
  """A line deleted from metrics.jsonl of a finished run (10 epochs), and of a run stopped at
  epoch 2, then the command of 10 epochs."""
  outcomes = []
  for epochs in stopped_at:
    line, command = (7, "the same command") if epochs == 10 else (3, "`--epochs=10`")
    workdir = lab.copy(epochs, f"deleted-line-{epochs}")
    lines = metrics_text(workdir).splitlines(keepends=True)
    damaged = "".join(lines[: line - 1] + lines[line:])
    (workdir / "metrics.jsonl").write_text(damaged)
    resumed = lab.train(workdir, "--epochs=10")
    outcomes.append(
      Outcome(
        f"a line deleted from metrics.jsonl of a run {'finished' if epochs == 10 else 'stopped'} "
        f"at epoch {epochs}",
        f"`sed -i {line}d metrics.jsonl`, then {command}",
        user_saw(resumed),
        rewritten_from_checkpoint(resumed, workdir, lab.reference(10), damaged),
        "the line rewritten from the checkpoint (one line; the file kept); the result equals "
        "the uninterrupted run's",
        workdir,
        lab.reference(10),
      )
    )
  return outcomes


def deleted_checkpoints(lab: Lab, stopped_at: tuple[int, ...] = (10, 2)) -> list[Outcome]:
  """checkpoints/ removed from a finished run (10 epochs), and emptied in a run stopped at
  epoch 2; then the command of 10 epochs."""
  outcomes = []
  for epochs in stopped_at:
    caused_by = "`rm -rf checkpoints`" if epochs == 10 else "`rm -rf checkpoints/*`"
    workdir = lab.copy(epochs, f"deleted-checkpoints-{epochs}")
    shutil.rmtree(workdir / "checkpoints")
    if epochs == 2:
      (workdir / "checkpoints").mkdir()
    before = results(workdir)
    refused = lab.train(workdir, "--epochs=10")
    outcomes.append(
      Outcome(
        f"checkpoints deleted from a run {'finished' if epochs == 10 else 'stopped'} at epoch "
        f"{epochs}",
        f"{caused_by}, then {'the same command' if epochs == 10 else '`--epochs=10`'}",
        user_saw(refused),
        one_line(refused, "but no checkpoint to resume them from")
        and "never does by itself" in refused.seen[0]
        and results(workdir) == before,
        "refused in one line (never retrained from epoch 0 over the results); nothing changes",
        workdir,
      )
    )
  return outcomes


def delete_mid_run(lab: Lab, workdir: Path, gone: Path, epochs: int = 400) -> tuple[bool, Run]:
  """train.py of ``epochs`` on ``workdir``, and ``gone`` removed (`rm -rf`) by this process
  between two saves, the moment a checkpoint appears; whether it was removed, and how the run
  ended."""
  process = lab.start(workdir, f"--epochs={epochs}")
  # Between two saves (a save cut short is a fault of its own): the run is stopped the moment
  # a checkpoint appears and let go at once if the next save has begun.
  hit = False
  for epoch in range(2, min(epochs, 50)):
    if not wait_for((workdir / "checkpoints" / str(epoch)).is_dir, poll=0.0005):
      break
    process.send_signal(signal.SIGSTOP)
    saving = any(".orbax-checkpoint-tmp" in n for n in os.listdir(workdir / "checkpoints"))
    if not saving:
      shutil.rmtree(gone)
    process.send_signal(signal.SIGCONT)
    if not saving:
      hit = True
      break
  _, stderr = process.communicate(timeout=300)
  return hit, Run(process.returncode, stderr)


def deleted_while_running(lab: Lab, targets=("checkpoints", "workdir")) -> list[Outcome]:
  """checkpoints/, then the whole workdir, removed by another process (`rm -rf`) while train.py
  runs, the moment checkpoints/2 appears; ``targets``: those of the two to try."""
  outcomes = []
  for target in targets:
    workdir = lab.root / f"deleted-while-running-{target}"
    gone = workdir / "checkpoints" if target == "checkpoints" else workdir
    hit, result = delete_mid_run(lab, workdir, gone)
    outcomes.append(
      Outcome(
        f"{'checkpoints/' if target == 'checkpoints' else 'the workdir'} deleted mid-run",
        f"`rm -rf {'checkpoints' if target == 'checkpoints' else 'WORKDIR'}` by another process "
        "between two saves (the run stopped by SIGSTOP the moment `checkpoints/N` appears), "
        "during `--epochs=400`",
        user_saw(result),
        hit
        and one_line(result, f"{gone} was deleted while this run was writing it")
        and "compilation cache" not in result.seen[0],
        "one line naming the folder deleted (not blamed on the compilation cache)",
        workdir,
      )
    )
  return outcomes


def smaller_epochs(lab: Lab) -> list[Outcome]:
  workdir = lab.copy(3, "smaller-epochs")
  before = results(workdir)
  refused = lab.train(workdir, "--epochs=1")
  return [
    Outcome(
      "a smaller --epochs on a finished run",
      "`--epochs=1` on a run trained for 3 epochs",
      user_saw(refused),
      one_line(refused, "trained for 3 epochs, more than --epochs 1")
      and results(workdir) == before,
      "refused in one line (never a summary that mislabels its epochs); nothing changes",
    )
  ]


# A bigger MLP for the signal faults: its saves last long enough to be hit (~10 MB each).
_BIG_TASK = "--task=tiny_mnist(model='mlp_mnist', data_options={'validation_size': 32})"


def signal_during_save(lab: Lab, signum: int, attempts: int = 5) -> Outcome:
  """A real signal sent to train.py the moment a checkpoint's save starts."""
  name = signal.Signals(signum).name
  for attempt in range(attempts):
    workdir = lab.root / f"signal-{name}-{attempt}"
    process = lab.start(workdir, "--epochs=40", task=_BIG_TASK, grid=("--seeds=4",))
    checkpoints = workdir / "checkpoints"
    hit = wait_for(functools.partial(_saving, checkpoints, 3), poll=0.0005)
    if hit:
      process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    result = Run(process.returncode, stderr)
    if "during the save" in stderr:
      break
  if not hit:  # The save came and went between two polls (under load): no signal was sent.
    return Outcome(
      f"{name} during a checkpoint's save",
      f"not caused: the save of epoch 3 was not seen in the last of {attempts} tries (no signal)",
      user_saw(result),
      False,
      "the save finishes, then one line (no traceback); the rerun resumes from epoch 3",
      workdir,
    )
  finished = sorted(os.listdir(checkpoints)) == ["2", "3"]
  resumed = lab.train(workdir, "--epochs=5", task=_BIG_TASK, grid=("--seeds=4",))
  reference = lab.reference(5, task=_BIG_TASK, grid=("--seeds=4",))
  epochs = [json.loads(line)["epoch"] for line in metrics_text(workdir).splitlines()]
  expected_line = (
    f"train.py: interrupted by {name} during the save of the checkpoint of epoch 3, which was "
    "completed first; re-run the same command to resume."
  )
  return Outcome(
    f"{name} during a checkpoint's save",
    f"`kill -{name.removeprefix('SIG')}` sent to train.py the moment `checkpoints/3.orbax-"
    "checkpoint-tmp` appears, then the same command",
    user_saw(result),
    result.returncode == 128 + signum
    and result.seen == [expected_line]
    and finished
    and resumed.returncode == 0
    and epochs == sorted(e for e in range(1, 6) for _ in range(4))
    and same_results(workdir, reference),
    "the save finishes, then one line (no traceback); the rerun resumes from epoch 3 and ends "
    "equal to the uninterrupted run",
    workdir,
    reference,
  )


def _saving(checkpoints: Path, epoch: int) -> bool:
  """Whether the save of ``epoch``'s checkpoint has started (Orbax's temporary folder)."""
  return checkpoints.is_dir() and any(
    n.startswith(f"{epoch}.orbax-checkpoint-tmp") for n in os.listdir(checkpoints)
  )


def signals(lab: Lab) -> list[Outcome]:
  return [signal_during_save(lab, signal.SIGINT), signal_during_save(lab, signal.SIGTERM)]


# tiny_mnist evaluated twice an epoch: a kill or signal can land between two evaluations.
_HALVES_TASK = "--task=tiny_mnist(evals_per_epoch=2, data_options={'validation_size': 32})"


def _mid_epoch(workdir: Path, epoch: int) -> bool:
  """Whether metrics.jsonl holds a record of the middle of ``epoch`` (its first evaluation)."""
  path = workdir / "metrics.jsonl"
  text = path.read_text() if path.exists() else ""
  return any(epoch - 1 < float(e) < epoch for e in re.findall(r'"epoch": ([\d.]+)', text))


# When SIGINT is sent, after the workdir's lock file appears: from at once (before any step) to
# into the first steps. Python's own handler raised KeyboardInterrupt wherever the main thread
# was, JAX's garbage-collection callback included, which drops it: at 1, 2, 20 and 200 ms the
# run went on to the end and exited 0.
_SIGINT_DELAYS = (0.0, 0.001, 0.002, 0.005, 0.02, 0.2)


def interrupts(lab: Lab) -> list[Outcome]:
  """SIGINT at each of `_SIGINT_DELAYS` after the lock file appears, from before any step on;
  SIGTERM between two evaluations of an epoch (outside a save). Each then the same command,
  which must end equal to an uninterrupted run."""
  reference = lab.reference(4, task=_HALVES_TASK)
  expected = "train.py: interrupted by {}; re-run the same command to resume."
  outcomes = []
  cases = [(signal.SIGINT, delay, "lock") for delay in _SIGINT_DELAYS]
  cases.append((signal.SIGTERM, 0.0, 3))
  stops: dict[int, list[Run]] = {signal.SIGINT: [], signal.SIGTERM: []}
  for signum, delay, ready in cases:
    name = signal.Signals(signum).name
    for attempt in range(5):
      workdir = lab.root / f"{name}-outside-a-save-{delay}-{attempt}"
      process = lab.start(workdir, "--epochs=4", task=_HALVES_TASK)
      if ready == "lock":
        hit = wait_for(lambda w=workdir: (w / "lock").exists(), poll=0.0005)
      else:
        hit = wait_for(functools.partial(_mid_epoch, workdir, ready), poll=0.0005)
      time.sleep(delay)
      # On a loaded machine this process may see the moment only after the run has ended
      # (the lock file stays): that try is not a fault, and is made again.
      hit = hit and process.poll() is None
      process.send_signal(signum)
      _, stderr = process.communicate(timeout=300)
      if hit and "during the save" not in stderr:
        break
    stops[signum].append(Run(process.returncode, stderr))
    if signum == signal.SIGINT and delay != _SIGINT_DELAYS[-1]:
      continue  # the last SIGINT's run is resumed
    stopped = stops[signum]
    resumed = lab.train(workdir, "--epochs=4", task=_HALVES_TASK)
    when = (
      f"{', '.join(f'{d * 1000:g}' for d in _SIGINT_DELAYS)} ms after the workdir's lock file "
      "appears (from before any step), each in a run of its own; the last run resumed"
      if signum == signal.SIGINT
      else "the moment the first record of the middle of epoch 3 appears"
    )
    right = [
      run.returncode == 128 + signum and run.seen == [expected.format(name)] for run in stopped
    ]
    shown = next((run for run, ok in zip(stopped, right, strict=True) if not ok), stopped[-1])
    outcomes.append(
      Outcome(
        f"{name} outside a checkpoint's save",
        f"`kill -{name.removeprefix('SIG')}` sent to train.py {when}, then the same command",
        user_saw(shown) + " — then: " + user_saw(resumed),
        all(right)
        and resumed.returncode == 0
        and not resumed.seen
        and same_results(workdir, reference),
        "one line naming the signal (no traceback), whenever it lands; the rerun ends equal to "
        "the uninterrupted run",
        workdir,
        reference,
      )
    )
  return outcomes


def ignored_sigint(lab: Lab) -> list[Outcome]:
  """SIGINT sent to a train.py started with SIGINT ignored (`cmd &` in a script), the moment a
  save starts and between two evaluations of an epoch: ignored both times, as the process
  asked. (The save's run is of 5 epochs, the epoch's of 4: each ends as an uninterrupted run
  that `signal_during_save` and `kill_9`, or `interrupts`, compare with too.)"""
  outcomes = []
  for when in ("save", "epoch"):
    task = _BIG_TASK if when == "save" else _HALVES_TASK
    grid = ("--seeds=4",) if when == "save" else GRID
    epochs = 5 if when == "save" else 4
    for attempt in range(5):  # Until the signal lands when asked (a save can be brief).
      workdir = lab.root / f"ignored-sigint-{when}-{attempt}"
      process = lab.start(workdir, f"--epochs={epochs}", ignore_sigint=True, task=task, grid=grid)
      if when == "save":
        hit = wait_for(functools.partial(_saving, workdir / "checkpoints", 2), poll=0.0005)
      else:
        hit = wait_for(functools.partial(_mid_epoch, workdir, 3), poll=0.0005)
      process.send_signal(signal.SIGINT)
      _, stderr = process.communicate(timeout=300)
      result = Run(process.returncode, stderr)
      if hit:
        break
    reference = lab.reference(epochs, task=task, grid=grid)
    outcomes.append(
      Outcome(
        "SIGINT to a run started with SIGINT ignored, "
        + ("during a save" if when == "save" else "mid-epoch"),
        "`kill -INT` sent the moment "
        + (
          "`checkpoints/2.orbax-checkpoint-tmp` appears"
          if when == "save"
          else "the first record of the middle of epoch 3 appears"
        )
        + ", to train.py started with SIGINT ignored (as `cmd &` in a script)",
        user_saw(result),
        hit and result.returncode == 0 and not result.seen and same_results(workdir, reference),
        "ignored, as the process was started to do: the run ends as the uninterrupted one",
        workdir,
        reference,
      )
    )
  return outcomes


def kill_9(lab: Lab) -> list[Outcome]:
  """`kill -9` in the middle of a checkpoint's save, and between two evaluations of an epoch;
  then the same command, which must end equal to an uninterrupted run."""
  outcomes = []
  for attempt in range(5):  # Until the kill lands inside the save: its temporary folder stays.
    workdir = lab.root / f"kill-9-mid-save-{attempt}"
    process = lab.start(workdir, "--epochs=5", task=_BIG_TASK, grid=("--seeds=4",))
    checkpoints = workdir / "checkpoints"
    wait_for(functools.partial(_saving, checkpoints, 2), poll=0.0005)
    process.kill()
    process.communicate(timeout=300)
    left = sorted(os.listdir(checkpoints)) if checkpoints.is_dir() else []
    if any(".orbax-checkpoint-tmp" in name for name in left):
      break
  resumed = lab.train(workdir, "--epochs=5", task=_BIG_TASK, grid=("--seeds=4",))
  reference = lab.reference(5, task=_BIG_TASK, grid=("--seeds=4",))
  outcomes.append(
    Outcome(
      "`kill -9` during a checkpoint's save",
      "`kill -9` of train.py the moment `checkpoints/2.orbax-checkpoint-tmp` appears (it stays: "
      f"{', '.join(left)}), then the same command",
      user_saw(resumed),
      any(".orbax-checkpoint-tmp" in name for name in left)
      and resumed.returncode == 0
      and not resumed.seen
      and sorted(os.listdir(checkpoints)) == ["4", "5"]
      and same_results(workdir, reference),
      "the unfinished checkpoint is never restored and is removed by the next save; the rerun "
      "resumes from epoch 1 and ends equal to the uninterrupted run",
      workdir,
      reference,
    )
  )
  workdir = lab.root / "kill-9-mid-epoch"
  process = lab.start(workdir, "--epochs=4", task=_HALVES_TASK)
  wait_for(functools.partial(_mid_epoch, workdir, 3), poll=0.0005)
  process.kill()
  process.communicate(timeout=300)
  records = len(metrics_text(workdir).splitlines())
  resumed = lab.train(workdir, "--epochs=4", task=_HALVES_TASK)
  reference = lab.reference(4, task=_HALVES_TASK)
  outcomes.append(
    Outcome(
      "`kill -9` during an epoch",
      "`kill -9` of train.py the moment the first record of the middle of epoch 3 appears "
      f"(evaluated twice an epoch; {records} records written), then the same command",
      user_saw(resumed),
      resumed.returncode == 0 and not resumed.seen and same_results(workdir, reference),
      "the records after the last checkpoint are written again, once; the rerun ends equal to "
      "the uninterrupted run",
      workdir,
      reference,
    )
  )
  return outcomes


def disk_full(lab: Lab) -> list[Outcome]:
  """A run on a disk too small for it, then the same command once there is room."""
  outcomes = []
  with tmpfs(lab.root / "full-disk", "700k") as disk:
    workdir = disk / "run"
    full = lab.train(workdir, "--epochs=3")
    remount(disk, "size=16m")
    resumed = lab.train(workdir, "--epochs=3")
    outcomes.append(
      Outcome(
        "the disk fills up during a run",
        "--workdir on a 700 KiB tmpfs (fills at the second checkpoint), then the tmpfs enlarged "
        "and the same command",
        user_saw(full) + " — then: " + user_saw(resumed),
        one_line(full, "No space left on device")
        and "intact" in full.seen[0]
        and resumed.returncode == 0
        and same_results(workdir, lab.reference(3)),
        "one line naming what could not be written; the rerun ends equal to the uninterrupted run",
      )
    )
  return outcomes


def bad_flags(lab: Lab) -> list[Outcome]:
  """Flags that are not UTF-8, a grid given in another order, a batch larger than the data."""
  outcomes = []
  workdir = lab.root / "not-utf8-\udcff"  # how Python hands over the byte 0xff of argv
  result = lab.train(workdir, "--epochs=1")
  outcomes.append(
    Outcome(
      "a --workdir that is not UTF-8",
      "`--workdir=$'not-utf8-\\xff'`",
      user_saw(result),
      one_line(result, "is not UTF-8 (byte 0xff") and not os.path.exists(workdir),
      "one line before any work (Orbax takes UTF-8 paths only); nothing written",
    )
  )
  workdir = lab.root / "task-not-utf8"
  result = lab.train(workdir, task="--task=tiny_mnist\udcff")
  outcomes.append(
    Outcome(
      "a --task that is not UTF-8",
      "`--task=$'tiny_mnist\\xff'`",
      user_saw(result),
      one_line(result, "--task b'tiny_mnist\\xff' is not UTF-8") and not workdir.exists(),
      "one line naming the flag and the byte; nothing written",
    )
  )
  workdir = lab.copy(1, "seeds-reordered")
  before = results(workdir)
  result = lab.train(workdir, "--epochs=1", grid=("--seeds=1,0", "--learning_rates=1e-3"))
  outcomes.append(
    Outcome(
      "the run's seeds in another order",
      "`--seeds=1,0` on the workdir of a run with seeds 0,1",
      user_saw(result),
      one_line(result, "seeds=[0, 1] (now lrs=[0.001] seeds=[1, 0]) (the same members in another")
      and results(workdir) == before,
      "refused in one line that shows both orders; nothing changes",
    )
  )
  workdir = lab.root / "huge-batch"
  result = lab.train(workdir, "--batch_size=1000000000")
  outcomes.append(
    Outcome(
      "--batch_size=1000000000",
      "a batch larger than the training split (224 images)",
      user_saw(result),
      one_line(result, "--batch_size 1000000000 is larger than the training split (224 items)")
      and not workdir.exists(),
      "one line naming the flag and the largest valid value",
    )
  )
  return outcomes


def _swap(a: Path, b: Path) -> None:
  """Swaps the contents of two files."""
  a_bytes = a.read_bytes()
  a.write_bytes(b.read_bytes())
  b.write_bytes(a_bytes)


def _run_twice(lab: Lab, name: str, cache: Path) -> tuple[Path, Run, Run]:
  """A run on ``cache`` into the workdir ``name-run`` (returned), then another (``name-again``)."""
  workdir = lab.root / f"{name}-run"
  result = lab.train(workdir, "--epochs=2", f"--compilation_cache={cache}")
  again = lab.train(lab.root / f"{name}-again", "--epochs=2", f"--compilation_cache={cache}")
  return workdir, result, again


def compilation_cache(lab: Lab) -> list[Outcome]:
  """Two entries of JAX's compilation cache swapped, then one cut short."""
  outcomes = []
  cache = lab.root / "damaged-cache"  # JAX keys entries by the cache's path too: one of its own
  lab.train(lab.root / "damaged-cache-first", "--epochs=2", f"--compilation_cache={cache}")
  # The programs that start the members and train them: one entry each, of other arities (so
  # JAX refuses the swapped program's arguments itself), the same pair on every machine.
  entries = sorted([*cache.glob("jit_init_members-*-cache"), *cache.glob("jit_train_segment-*")])
  assert len(entries) == 2, entries
  first, second = entries
  _swap(first, second)
  workdir = lab.root / "swapped-cache-run"
  failed = lab.train(workdir, "--epochs=2", f"--compilation_cache={cache}")
  resumed = lab.train(workdir, "--epochs=2", "--compilation_cache=none")
  outcomes.append(
    Outcome(
      "two entries of JAX's compilation cache swapped",
      "the files of two programs (`jit_init_members`, `jit_train_segment`) in JAX's cache "
      "swapped, then a run on "
      "that cache; then the same command with `--compilation_cache=none`",
      user_saw(failed) + " — then: " + user_saw(resumed),
      one_line(failed, "re-run the same command with --compilation_cache=none")
      and str(cache) in failed.seen[0]
      and resumed.returncode == 0
      and same_results(workdir, lab.reference(2)),
      "one line naming the cache and --compilation_cache=none (no traceback); that command ends "
      "equal to the uninterrupted run",
      workdir,
      lab.reference(2),
    )
  )
  _swap(first, second)
  first.write_bytes(first.read_bytes()[:1000])
  workdir, result, again = _run_twice(lab, "cut-cache", cache)
  outcomes.append(
    Outcome(
      "an entry of JAX's compilation cache cut short",
      "the file of a program (`jit_init_members`) in JAX's cache cut to 1,000 bytes (what a "
      "kill -9 while JAX writes it leaves), then a run on that cache, then another",
      user_saw(result) + " — then: " + user_saw(again),
      result.returncode == 0
      and len(result.seen) == 1
      and f"the compilation cache {cache} held an entry of jit_init_members that cannot be read"
      in result.seen[0]
      and "Error reading persistent compilation cache entry" not in result.stderr
      and same_results(workdir, lab.reference(2))
      and again.returncode == 0
      and not again.seen,
      "one line (not JAX's warning); the program's entries are replaced by the program compiled "
      "anew, and the run equals the uninterrupted one; the next run loads it without a word",
      workdir,
      lab.reference(2),
    )
  )
  return outcomes


# What `bad_workdirs` tries, each a row of the table.
BAD_WORKDIRS = ("is_file", "read_only", "too_long", "in_proc", "forbidden")


def bad_workdirs(lab: Lab, cases: tuple[str, ...] = BAD_WORKDIRS) -> list[Outcome]:
  """A --workdir that cannot be written, each of ``cases`` (`BAD_WORKDIRS`) in its order."""
  outcomes = []
  if "is_file" in cases:
    a_file = lab.root / "a-file"
    a_file.write_text("results\n")
    result = lab.train(a_file)
    outcomes.append(
      Outcome(
        "--workdir is a file",
        "`--workdir` naming an existing file",
        user_saw(result),
        one_line(result, "is a file, not a folder") and a_file.read_text() == "results\n",
        "one line; the file is untouched",
      )
    )
  if "read_only" in cases:
    with tmpfs(lab.root / "read-only", "1m", "ro") as disk:
      result = lab.train(disk / "run")
      outcomes.append(
        Outcome(
          "--workdir on a read-only disk",
          "`--workdir` inside a tmpfs mounted read-only",
          user_saw(result),
          one_line(result, "read-only file system"),
          "one line naming the workdir",
        )
      )
  for case, caused_by, workdir, needle in (
    ("too_long", "a folder name of 300 bytes", lab.root / ("a" * 300), "longer than the 255"),
    ("in_proc", "`--workdir=/proc/x`: no folder can be made there", Path("/proc/x"),
     "no folder can be"),
  ):  # fmt: skip
    if case not in cases:
      continue
    result = lab.train(workdir)
    outcomes.append(
      Outcome(
        f"--workdir that cannot be created ({caused_by.split(':')[0].strip('`')})",
        caused_by,
        user_saw(result),
        one_line(result, needle) and not os.path.exists(workdir),
        "one line before any work, naming --workdir; nothing created",
      )
    )
  if "forbidden" in cases:
    forbidden = lab.root / "not-mine"
    forbidden.mkdir()
    os.chown(forbidden, 65534, 65534)
    forbidden.chmod(0o755)
    result = lab.train(
      forbidden / "run", prefix=["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    )
    outcomes.append(
      Outcome(
        "--workdir not writable by the user",
        "`--workdir` in a folder of another user (mode 755), run by root without its capabilities",
        user_saw(result),
        one_line(result, "not writable by this user") and os.listdir(forbidden) == [],
        "one line; nothing written",
      )
    )
  return outcomes


def too_big(lab: Lab) -> list[Outcome]:
  from gelujax import host

  outcomes = []
  # The 100,000 seeds, or more where this machine has room for them (tiny_mnist: 13,002
  # parameters, about 0.63 MB a member with Adam and the host's share).
  many = max(100_000, host.available_memory() // 600_000)
  for seeds, needle in (
    (str(many), f"A grid of {2 * many:,} members needs about"),
    ("99999999999999", "--seeds 99999999999999 asks for"),
  ):
    workdir = lab.root / f"seeds-{seeds}"
    result = lab.train(workdir, grid=(f"--seeds={seeds}", "--learning_rates=1e-3,1e-4"))
    outcomes.append(
      Outcome(
        f"--seeds={seeds}",
        f"`--seeds={seeds} --learning_rates=1e-3,1e-4`",
        user_saw(result),
        one_line(result, needle) and not workdir.exists() and result.max_rss < 2e9,
        f"one line before any work, nothing written (peak memory {result.max_rss / 1e6:.0f} MB)",
      )
    )
  workdir = lab.root / "lr-tiny"
  result = lab.train(workdir, grid=("--seeds=2", "--learning_rates=1e-300"))
  outcomes.append(
    Outcome(
      "--learning_rates=1e-300",
      "a learning rate that is 0 in float32",
      user_saw(result),
      one_line(result, "which is 0 in float32") and not workdir.exists(),
      "one line before any work, nothing written",
    )
  )
  return outcomes


def bad_data(lab: Lab) -> list[Outcome]:
  """Malformed data files: a gzip bomb as an IDX file, NaN embeddings, non-UTF-8 tweets."""
  outcomes = []
  bomb = lab.root / "bomb"
  shutil.copytree(lab.data_dir, bomb)
  header = b"\x00\x00\x08\x03" + (256).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
  compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
  with open(bomb / "train-images-idx3-ubyte.gz", "wb") as f:
    f.write(compressor.compress(header))
    zeros = bytes(1 << 24)
    for _ in range(256):  # 4 GiB of zeros: about 4 MB of gzip
      f.write(compressor.compress(zeros))
    f.write(compressor.flush())
  size = os.path.getsize(bomb / "train-images-idx3-ubyte.gz")
  result = run(
    [sys.executable, str(TRAIN), TASK, f"--data_dir={bomb}", f"--workdir={lab.root / 'b'}"],
    lab.env(),
  )
  outcomes.append(
    Outcome(
      "a gzip bomb as an IDX file",
      f"train-images-idx3-ubyte.gz of {size / 1e6:.1f} MB that inflates to 4.3 GB, its header "
      "saying 256 images",
      user_saw(result) + f" (peak memory {result.max_rss / 1e6:.0f} MB)",
      one_line(result, "but the file holds more than") and result.max_rss < 1e9,
      "one line naming the file, read in bounded memory",
    )
  )
  twitter = lab.root / "twitter"
  twitter.mkdir()
  tweet = "hello\t!\nworld\tN\n\n"
  for split in ("train", "dev", "test"):
    (twitter / f"oct27.{split}").write_text(tweet)
  vectors = twitter / "vectors.txt"
  vectors.write_text("</s> 0.1 0.2\nUUUNKKK 0.3 nan\nhello 0.5 0.6\n")
  task = f"--task=twitter_pos(data_options={{'embeddings': '{vectors}'}})"
  result = run(
    [sys.executable, str(TRAIN), task, f"--data_dir={twitter}", f"--workdir={lab.root / 't'}"],
    lab.env(),
  )
  outcomes.append(
    Outcome(
      "NaN in an embeddings file",
      "a vector `UUUNKKK 0.3 nan` on line 2 of the --embeddings file",
      user_saw(result),
      one_line(result, "vectors.txt, line 2: the vector of 'UUUNKKK' holds NaN"),
      "one line naming the file and line",
    )
  )
  (twitter / "oct27.dev").write_bytes(b"hello\t!\n\xff\xfe\tN\n")
  result = run(
    [sys.executable, str(TRAIN), "--task=twitter_pos", f"--data_dir={twitter}",
     f"--workdir={lab.root / 't2'}"],
    lab.env(),
  )  # fmt: skip
  outcomes.append(
    Outcome(
      "a Twitter file that is not UTF-8",
      "bytes 0xff 0xfe on line 2 of oct27.dev",
      user_saw(result),
      one_line(result, "oct27.dev, line 2: not UTF-8 text"),
      "one line naming the file and line",
    )
  )
  (twitter / "oct27.dev").write_text("")
  result = run(
    [sys.executable, str(TRAIN), "--task=twitter_pos", f"--data_dir={twitter}",
     f"--workdir={lab.root / 't3'}"],
    lab.env(),
  )  # fmt: skip
  outcomes.append(
    Outcome(
      "an empty Twitter file",
      "oct27.dev of 0 bytes",
      user_saw(result),
      one_line(result, "oct27.dev: holds no tweets"),
      "one line naming the file",
    )
  )
  return outcomes


def no_cifar(lab: Lab) -> list[Outcome]:
  home = lab.root / "home"
  home.mkdir(exist_ok=True)
  result = run(
    [sys.executable, str(TRAIN), "--task=cifar10", "--activation=gelu",
     f"--workdir={lab.root / 'cifar'}"],
    lab.env(HOME=str(home)),
  )  # fmt: skip
  return [
    Outcome(
      "CIFAR-10 with no data here",
      "`train.py --task=cifar10 --activation=gelu`, no --data_dir and no TFDS copy",
      user_saw(result),
      result.returncode == 1
      and all(line.startswith("gelujax: ") for line in result.seen[:-1])
      and result.seen[-1].startswith("train.py: error: Cannot load dataset 'cifar10'")
      and "Pass --data_dir" in result.seen[-1]
      and "Traceback" not in result.stderr,
      "the download tried where a network is (none here, or GELUJAX_OFFLINE=1), its progress "
      "lines, then one paragraph line naming every place looked in and where to put the data",
    )
  ]


FAULTS: dict[str, Callable[[Lab], list[Outcome]]] = {
  "second_writer": second_writer,
  "config_deleted": config_deleted,
  "config_empty": config_empty,
  "flipped_bytes": flipped_bytes,
  "torn_metrics": torn_metrics,
  "malformed_metrics": malformed_metrics,
  "torn_tail": torn_tail,
  "deleted_line": deleted_line,
  "deleted_checkpoints": deleted_checkpoints,
  "deleted_while_running": deleted_while_running,
  "smaller_epochs": smaller_epochs,
  "signals": signals,
  "interrupts": interrupts,
  "ignored_sigint": ignored_sigint,
  "kill_9": kill_9,
  "bad_flags": bad_flags,
  "compilation_cache": compilation_cache,
  "disk_full": disk_full,
  "bad_workdirs": bad_workdirs,
  "too_big": too_big,
  "bad_data": bad_data,
  "no_cifar": no_cifar,
}


def write_report(outcomes: list[Outcome], seconds: float, command: str, out: Path) -> None:
  out.mkdir(parents=True, exist_ok=True)
  lines = [
    "# Fault injection on a workdir",
    "",
    "Command (from the repository root, as root: the full and read-only disks are tmpfs mounts):",
    "",
    "```bash",
    command,
    "```",
    "",
    f"- Machine: {describe_machine()}",
    f"- Written: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}, in "
    f"{seconds:.0f} s",
    f"- Faults tried: {len(outcomes)}; as promised: {sum(o.ok for o in outcomes)}",
    "",
    "Each row is one fault caused the real way on `tiny_mnist` (MNIST-format fixture files): "
    "what was done, what `experiments/train.py` printed to stderr (less its progress bar) with "
    "its exit status, and whether that is the promised behaviour, checked by "
    "`benchmarks/faults.py` (the promise of each row is in faults.json). `$TMP` stands for the "
    "scratch folder of the run.",
    "",
    "| fault | caused by | what the user sees | as promised |",
    "|---|---|---|---|",
    *[o.row() for o in outcomes],
    "",
  ]
  (out / "faults.md").write_text("\n".join(lines))
  (out / "faults.json").write_text(json.dumps([o.report() for o in outcomes], indent=1) + "\n")


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output-dir", type=Path, default=RESULTS)
  parser.add_argument("--only", nargs="*", choices=sorted(FAULTS), default=None)
  args = parser.parse_args()
  # Started with SIGINT ignored (`python benchmarks/faults.py &`), every train.py it starts would
  # ignore it too (an ignored signal stays ignored across exec) and each SIGINT fault would be
  # void: restored here, in this process, not in each child by a preexec_fn, which runs Python
  # between fork and exec in a process with JAX's threads and can deadlock there.
  if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
  if not can_mount():
    print("benchmarks/faults.py: needs root (it mounts small tmpfs disks).", file=sys.stderr)
    return 2
  start = time.time()
  outcomes = []
  with tempfile.TemporaryDirectory(prefix="gelujax-faults-") as root:
    lab = Lab(Path(root))
    for name in args.only or FAULTS:
      for outcome in FAULTS[name](lab):
        outcome.seen = outcome.seen.replace(root, "$TMP")  # the run's scratch folder
        print(f"{'ok ' if outcome.ok else 'BAD'} {outcome.fault}: {outcome.seen}", flush=True)
        outcomes.append(outcome)
  command = "python benchmarks/faults.py" + "".join(
    f" --only {' '.join(args.only)}" for _ in [0] if args.only
  )
  write_report(outcomes, time.time() - start, command, args.output_dir)
  print(f"{sum(o.ok for o in outcomes)}/{len(outcomes)} faults as promised", flush=True)
  return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
  sys.exit(main())
