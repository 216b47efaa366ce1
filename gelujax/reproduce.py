"""``python -m gelujax.reproduce``: ``gelujax reproduce`` (:mod:`gelujax.cli.reproduce`, where
its flags are). Imported, it defines nothing: the command's flags are defined only when it
runs."""

if __name__ == "__main__":
  from gelujax.cli import reproduce

  reproduce.run_command("python -m gelujax.reproduce")
