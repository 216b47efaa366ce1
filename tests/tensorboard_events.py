"""Reading a run's TensorBoard files in the tests: every event, decoded with tensorboardX's
protocol buffers (an implementation independent of what gelujax writes by hand)."""

import glob
import importlib
import importlib.util
import os
import struct
import sys
import types

from google.protobuf import json_format


def tensorboardx_module(name: str) -> types.ModuleType:
  """``tensorboardX.<name>``, imported without running tensorboardX's ``__init__``, which imports
  PyTorch: seconds in every process that collects the tests, for a CRC and protocol buffers that
  need none of it."""
  if "tensorboardX" not in sys.modules:
    package = types.ModuleType("tensorboardX")
    package.__path__ = list(importlib.util.find_spec("tensorboardX").submodule_search_locations)
    sys.modules["tensorboardX"] = package
  return importlib.import_module(f"tensorboardX.{name}")


crc32c = tensorboardx_module("crc32c").crc32c
event_pb2 = tensorboardx_module("proto.event_pb2")


def read_event_protos(directory: str) -> list[event_pb2.Event]:
  """Every event of a TensorBoard directory, decoded with tensorboardX's protocol buffers after
  checking each record's TFRecord framing with tensorboardX's CRC-32C (an independent
  implementation of what gelujax writes by hand)."""

  def masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

  events = []
  for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
    with open(path, "rb") as f:
      data = f.read()
    offset = 0
    while offset < len(data):
      header = data[offset : offset + 8]
      (length,) = struct.unpack("<Q", header)
      (length_crc,) = struct.unpack("<I", data[offset + 8 : offset + 12])
      body = data[offset + 12 : offset + 12 + length]
      (body_crc,) = struct.unpack("<I", data[offset + 12 + length : offset + 16 + length])
      assert length_crc == masked(header) and body_crc == masked(body)
      events.append(event_pb2.Event.FromString(body))
      offset += 16 + length
  return events


def read_events(directory: str) -> list[tuple[int, str, float]]:
  """(step, tag, value) of every scalar in a TensorBoard directory."""
  return [
    (e.step, v.tag, v.simple_value)
    for e in read_event_protos(directory)
    for v in e.summary.value
    if v.WhichOneof("value") == "simple_value"
  ]


plugin_hparams_pb2 = tensorboardx_module("proto.plugin_hparams_pb2")


def read_hparams(directory: str) -> list[dict]:
  """The hyperparameters of each ``_hparams_/session_start_info`` summary in a TensorBoard
  directory, as TensorBoard's hparams plugin reads them (``HParamsPluginData``)."""
  found = []
  for event in read_event_protos(directory):
    for value in event.summary.value:
      if value.tag == "_hparams_/session_start_info":
        assert value.metadata.plugin_data.plugin_name == "hparams"
        data = plugin_hparams_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
        assert data.version == 0 and data.WhichOneof("data") == "session_start_info"
        hparams = data.session_start_info.hparams
        found.append({k: json_format.MessageToDict(v) for k, v in hparams.items()})
  return found
