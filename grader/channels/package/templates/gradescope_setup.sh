#!/usr/bin/env bash
# Gradescope image set-up: Python, the CPU build of torch, the grader's dependencies.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >/dev/null
python3 -m pip install --quiet --break-system-packages --upgrade pip 2>/dev/null \
  || python3 -m pip install --quiet --upgrade pip
PIP="python3 -m pip install --quiet"
$PIP --break-system-packages --version >/dev/null 2>&1 && PIP="$PIP --break-system-packages"
$PIP torch --index-url @CPU_INDEX@
$PIP -r /autograder/source/requirements.txt
