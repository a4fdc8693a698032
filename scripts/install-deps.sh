#!/usr/bin/env bash
# Installs the Debian packages dtrain needs to build, run and test, only if missing.
# Called by the Makefile before configuring; safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin
      zlib1g-dev libcairo2-dev graphviz dataset-fashion-mnist python3-torch python3-numpy clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
