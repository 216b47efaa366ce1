#!/usr/bin/env bash
# Installs gelujax with its test and benchmark extras, and the offline Fashion-MNIST data set.
# Usage: bash scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq dataset-fashion-mnist
else
  echo "apt-get not found: skipping Debian's dataset-fashion-mnist. gelujax downloads" \
       "Fashion-MNIST on first use when online (or pass --data_dir with its four IDX files)." >&2
fi

python -m pip install -q -e ".[dev,bench]"
