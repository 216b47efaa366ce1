"""The test processes run JAX as the entry points configure it, before any test starts it.

`experiments/train.py` calls `gelujax.devices.configure_cpu` before JAX starts, and the XLA
flags it leaves change how some products round; so does, on this jaxlib, whether ``XLA_FLAGS``
names the device count at all. The tests that compare a run made in their own process with one
made by train.py in a subprocess give both the same flags: one device, named in ``XLA_FLAGS`` as
the subprocesses' is (a count already there is kept), then `configure_cpu`'s own.

No test reaches the network for data (`no_network_data`).
"""

import os

import pytest

from gelujax import devices

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=1".strip()
  )
devices.configure_cpu("auto", 1)


@pytest.fixture(autouse=True)
def no_network_data(monkeypatch, tmp_path_factory):
  """No test downloads a data set or reads the user's data cache: the cache is a fresh folder
  and the network is off (the download tests turn it on for their 127.0.0.1 server)."""
  monkeypatch.setenv("GELUJAX_OFFLINE", "1")
  monkeypatch.setenv("GELUJAX_DATA_DIR", str(tmp_path_factory.mktemp("data_cache")))
  monkeypatch.delenv("GELUJAX_DATA_MIRROR", raising=False)
