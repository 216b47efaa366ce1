"""Everything about a run's folder, a module a job; this package is its public API.

* **Files** (`gelujax.workdir.files`). Every name inside a workdir (`CONFIG_FILE`,
  `METRICS_FILE`, ...), reading and writing its JSON files (`read_json`, `write_json`: atomic),
  and `WorkdirError`, which every refusal below raises: one message naming the workdir and what
  to do.
* **The run** (`gelujax.workdir.config`). `make_config` is the config.json object of a run; its
  `identity` (a hash less `RESUMABLE_FIELDS`) is what every checkpoint records. `check_run`
  refuses, before any work, a workdir that holds another run, a smaller ``epochs`` than it
  trained, or results with no checkpoint to resume them from. `read_config` returns the run a
  workdir holds: its config.json, or, when that is missing or not a run's config, the config
  recorded in its newest checkpoint; `write_config` keeps a broken config.json as
  ``config.json.damaged``. `software_record` is config.json's record of the software that ran
  the run (its versions and git commit; `SOFTWARE`), not part of its identity.
* **One writer** (`gelujax.workdir.lock`). `writing` holds an OS lock (``fcntl.flock`` on
  ``workdir/lock``) for the whole run, checks that the workdir still holds what `check_run` saw,
  and maps every disk error (`disk_errors`) into one `WorkdirError` line naming the file. The
  kernel releases the lock when its process dies, however it dies, so a lock left by a killed
  run never blocks the next one.
* **The run's records** (`gelujax.workdir.records`). `read_metrics` tolerates a last line cut
  short; `metrics_lines` is the one text of records. A resume makes metrics.jsonl hold exactly
  the records up to the restored checkpoint, which carries them (`resume_metrics`): whatever
  was cut, deleted or changed before it is rewritten (the file kept as
  ``metrics.jsonl.damaged``), so the run ends byte-equal to an uninterrupted one. `summarize` is
  the summary.json of a run's records; `derive_summary` gives it again from a finished run's
  config.json and metrics.jsonl, which `check_finished` refuses unless they hold every evaluation
  the run made.
* **Disk errors** (`gelujax.workdir.disk`). `check_writable` refuses a workdir that cannot be
  written before any work; `disk_errors` turns a full, read-only or forbidden disk into one
  line.
"""

from gelujax.workdir.config import (
  RESUMABLE_FIELDS,
  SOFTWARE,
  check_epochs,
  check_run,
  check_same_data,
  check_same_run,
  identity,
  make_config,
  read_config,
  software_record,
  write_config,
)
from gelujax.workdir.disk import check_writable, disk_errors
from gelujax.workdir.files import (
  CHECKPOINT_DIR,
  CONFIG_FILE,
  DAMAGED_DIR,
  LOCK_FILE,
  METRICS_FILE,
  RECORD_FILE,
  RECORD_ITEM,
  SUMMARY_FILE,
  TENSORBOARD_DIR,
  WorkdirError,
  checkpoint_epochs,
  folder_name,
  jsonable,
  keep_aside,
  read_json,
  to_json_number,
  trained_epochs,
  write_json,
)
from gelujax.workdir.lock import Lock, writing
from gelujax.workdir.records import (
  RECORD_KEYS,
  check_finished,
  check_resumable,
  derive_summary,
  metrics_lines,
  read_metrics,
  resume_metrics,
  summarize,
  write_metrics,
)

__all__ = [
  "CHECKPOINT_DIR",
  "CONFIG_FILE",
  "DAMAGED_DIR",
  "LOCK_FILE",
  "METRICS_FILE",
  "RECORD_FILE",
  "RECORD_ITEM",
  "RECORD_KEYS",
  "RESUMABLE_FIELDS",
  "SOFTWARE",
  "SUMMARY_FILE",
  "TENSORBOARD_DIR",
  "Lock",
  "WorkdirError",
  "check_epochs",
  "check_finished",
  "check_resumable",
  "check_run",
  "check_same_data",
  "check_same_run",
  "check_writable",
  "checkpoint_epochs",
  "derive_summary",
  "disk_errors",
  "folder_name",
  "identity",
  "jsonable",
  "keep_aside",
  "make_config",
  "metrics_lines",
  "read_config",
  "read_json",
  "read_metrics",
  "resume_metrics",
  "software_record",
  "summarize",
  "to_json_number",
  "trained_epochs",
  "write_config",
  "write_json",
  "write_metrics",
  "writing",
]
