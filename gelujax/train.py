"""``python -m gelujax.train``: ``gelujax train`` (:mod:`gelujax.cli.train`, where its flags
are). Imported, it defines nothing: the command's flags are defined only when it runs."""

if __name__ == "__main__":
  from gelujax.cli import train

  train.run_command("python -m gelujax.train")
