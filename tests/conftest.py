"""The test processes run JAX as the entry points configure it, before any test starts it.

`experiments/train.py` calls `gelujax.devices.configure_cpu` before JAX starts, and the XLA
flags it leaves change how some products round; so does, on this jaxlib, whether ``XLA_FLAGS``
names the device count at all. The tests that compare a run made in their own process with one
made by train.py in a subprocess give both the same flags: one device, named in ``XLA_FLAGS`` as
the subprocesses' is (a count already there is kept), then `configure_cpu`'s own.
"""

import os

from gelujax import devices

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=1".strip()
  )
devices.configure_cpu("auto", 1)
