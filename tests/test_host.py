"""gelujax.host: how a fresh process splits the CPU host, as each entry point starts it.

`configure_cpu` must run before JAX starts its backends, so each case it accepts runs in a new
Python process and reports what JAX then sees; the values it refuses are checked here.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import jax
import pytest

from gelujax import host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = """
import json, os, sys
from gelujax import host
count = host.configure_cpu(sys.argv[1], int(sys.argv[2]))
import jax
print(json.dumps({
  "returned": count, "devices": jax.device_count(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
  "default_cache": host.DEFAULT_CACHE,
}))
"""
USERS_FLAGS = (
  "--xla_force_host_platform_device_count=3 --xla_cpu_experimental_ynn_fusion_type=individual_dot"
)
# The probes: (--cpu_devices, grid size, the environment's changes: None unsets a variable).
# XLA_FLAGS is unset unless given.
PROBES = {
  "3 devices": ("3", 15, {}),
  "1 device": ("1", 1, {"JAX_COMPILATION_CACHE_DIR": None, "XDG_CACHE_HOME": "/xdg"}),
  "user": ("auto", 1, {"XLA_FLAGS": USERS_FLAGS}),
}


def start_probe(cpu_devices: str, members: int, changes: dict[str, str | None]):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  env.update(changes)
  return subprocess.Popen(
    [sys.executable, "-c", PROBE, cpu_devices, str(members)],
    env={k: v for k, v in env.items() if v is not None},
    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
  )  # fmt: skip


@pytest.fixture(scope="module")
def seen() -> dict[str, dict]:
  """What each of `PROBES` saw, each in its own fresh process, the processes side by side."""
  processes = {name: start_probe(*probe) for name, probe in PROBES.items()}
  results = {}
  for name, process in processes.items():
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    results[name] = json.loads(out.strip().splitlines()[-1])
  return results


def test_compiled_programs_go_where_jaxs_variable_says_else_to_the_users_cache(seen):
  # The tests' own processes keep theirs in a temporary folder (tests/conftest.py).
  assert host.DEFAULT_CACHE == os.environ["JAX_COMPILATION_CACHE_DIR"]
  assert not host.DEFAULT_CACHE.startswith(os.path.expanduser("~"))
  assert seen["3 devices"]["default_cache"] == host.DEFAULT_CACHE
  assert seen["1 device"]["default_cache"] == "/xdg/gelujax/jax"


@pytest.mark.parametrize(
  ("members", "cores", "expected"), [(1, 2, 1), (15, 2, 2), (3, 8, 3), (0, 4, 1), (100, 1, 1)]
)
def test_auto_gives_a_grid_one_device_per_core_and_a_member_one_device(members, cores, expected):
  assert host.choose_cpu_devices(members, cores) == expected


def test_several_devices_run_single_threaded_kernels_on_xlas_own_dots(seen):
  assert seen["3 devices"]["returned"] == seen["3 devices"]["devices"] == 3
  assert seen["3 devices"]["xla_flags"].split() == [
    "--xla_cpu_multi_thread_eigen=false",
    "--xla_cpu_experimental_ynn_fusion_type=",
  ]


def test_one_device_keeps_multithreaded_kernels(seen):
  assert seen["1 device"]["devices"] == 1
  assert seen["1 device"]["xla_flags"].split() == ["--xla_cpu_experimental_ynn_fusion_type="]


def test_the_users_own_xla_flags_win(seen):
  assert seen["user"]["returned"] == seen["user"]["devices"] == 3
  assert seen["user"]["xla_flags"].split() == [
    *USERS_FLAGS.split(),
    "--xla_cpu_multi_thread_eigen=false",
  ]


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5", ""])
def test_a_bad_device_count_is_refused_in_one_line(bad, monkeypatch):
  # Refused before JAX is asked anything, so this process (whose JAX has started) will do.
  monkeypatch.setenv("XLA_FLAGS", "")
  with pytest.raises(ValueError) as error:
    host.configure_cpu(bad, 4)
  assert str(error.value) == (
    f"`cpu_devices` {bad!r} is not valid: give 'auto' or a device count >= 1."
  )
  assert os.environ["XLA_FLAGS"] == ""  # nothing set


def test_a_count_after_jax_started_is_refused_in_one_line(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "")
  started = len(jax.devices("cpu"))  # this process's JAX has started (or starts here)
  with pytest.raises(ValueError) as error:
    host.configure_cpu(str(started + 1), 4)
  assert str(error.value) == (
    f"`cpu_devices` {started + 1}: JAX has already started with {started} CPU devices, and the "
    "device count can only be set before the first array is made."
  )
  assert host.configure_cpu(str(started), 4) == started  # what it has is fine


def test_describe_machine_names_the_cpu_devices_and_versions():
  import platform

  import jax

  line = host.describe_machine()
  kinds = collections.Counter(f"{d.device_kind} ({d.platform})" for d in jax.devices())
  assert line.startswith(platform.platform() + "; CPU: ")
  assert f", {os.cpu_count()} cores; " in line
  assert "devices: " + ", ".join(f"{n} x {k}" for k, n in kinds.items()) + ";" in line
  assert line.endswith(f"jax {jax.__version__}, Python {platform.python_version()}")


HOOKS_PROBE = """
import sys, threading, warnings
hooks = lambda: (warnings.showwarning, sys.excepthook, sys.unraisablehook, threading.excepthook)
before, path = hooks(), list(sys.path)
from tiny_task import REFERENCE, REFERENCE_MEMBERS, tiny_like
import gelujax
from gelujax import engine, host
gelujax.get_activation("acts:halved")(1.0)  # the user's module, in the folder it runs in
host.enable_compilation_cache(sys.argv[1])
engine.fit(tiny_like(REFERENCE, epochs=1), sys.argv[2], REFERENCE_MEMBERS, progress=False)
with host.repairing_compilation_cache():
  assert warnings.showwarning is not before[0]
  engine.fit(tiny_like(REFERENCE, epochs=2), sys.argv[2], REFERENCE_MEMBERS, progress=False)
print([a is b for a, b in zip(before, hooks())], sys.path == path)
"""


@pytest.mark.e2e
def test_training_with_the_compilation_cache_leaves_the_interpreters_hooks_as_they_were(tmp_path):
  """Importing gelujax, turning the compilation cache on and training leave the interpreter's
  hooks as they were; `host.repairing_compilation_cache` replaces ``warnings.showwarning`` only
  while its block runs (the scripts wrap their work in it). Resolving a user's activation leaves
  ``sys.path`` as it was (the scripts, not the library, add the folder they run in)."""
  (tmp_path / "acts.py").write_text("def halved(x):\n  return x / 2\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
  result = subprocess.run(
    [sys.executable, "-c", HOOKS_PROBE, str(tmp_path / "cache"), str(tmp_path / "run")],
    env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split() == ["[True,", "True,", "True,", "True]", "True"]


CTRL_C_IN_A_FINALIZER = """
import gc, os, signal, sys
from tiny_task import REFERENCE, REFERENCE_MEMBERS, tiny_like
from gelujax import engine
armed = []


def collected(phase, info):  # Ctrl-C that lands in a finalizer: Python drops its exception
  if armed:
    armed.clear()
    os.kill(os.getpid(), signal.SIGINT)


gc.callbacks.append(collected)
armed.append(True)
try:
  engine.fit(tiny_like(REFERENCE, epochs=3), sys.argv[1], REFERENCE_MEMBERS, progress=False)
except KeyboardInterrupt as e:
  print("stopped:", e, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
else:
  print("finished")
"""


@pytest.mark.e2e
def test_a_ctrl_c_a_finalizer_swallows_still_stops_a_users_fit(tmp_path):
  """A user's script keeps Python's own SIGINT handler; a Ctrl-C that lands in a garbage
  collection callback (as it did in JAX's, a few milliseconds into a run) was dropped there,
  and `engine.fit` trained to the end. It stops at the next segment, says nothing more, and the
  script's handler is its own again after."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
  result = subprocess.run(
    [sys.executable, "-c", CTRL_C_IN_A_FINALIZER, str(tmp_path / "run")],
    env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.splitlines() == ["stopped: interrupted by SIGINT True"]
  assert "Exception ignored" not in result.stderr
  epochs = [json.loads(line)["epoch"] for line in (tmp_path / "run" / "metrics.jsonl").open()]
  assert max(epochs) < 3


@pytest.mark.parametrize("xla_flags", ["", "--xla_force_host_platform_device_count=100000"])
def test_a_device_count_far_above_the_cores_is_refused_before_jax_is_asked(xla_flags, monkeypatch):
  """100000 devices: the kernel killed the process for memory before JAX had started; whether
  --cpu_devices or the user's own XLA_FLAGS ask for them, they are refused in one line."""
  monkeypatch.setenv("XLA_FLAGS", xla_flags)
  cores = host.host_cores()
  with pytest.raises(ValueError) as error:
    host.configure_cpu("auto" if xla_flags else "100000", 4)
  given = f"XLA_FLAGS's {xla_flags}" if xla_flags else "`cpu_devices` '100000'"
  assert str(error.value) == (
    f"{given} is more than 64 CPU devices per core (this host has {cores} "
    f"core{'s' * (cores != 1)}: at most {64 * cores:,}); each device has its own memory and "
    f"threads, and more devices than cores only slow a run down; give 'auto' or a count up to "
    f"{64 * cores:,}."
  )
  assert os.environ["XLA_FLAGS"] == xla_flags  # nothing set
