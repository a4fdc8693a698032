#!/usr/bin/env bash
# Installs the Debian packages dtrain needs to build, run and test, only if missing.
# Called by the Makefile before configuring; safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin
      zlib1g-dev libcairo2-dev libjansson-dev graphviz dataset-fashion-mnist python3-torch python3-numpy clang libclang-rt-14-dev
      libturbojpeg0-dev libpng-dev python3-pil libprotobuf-c-dev protobuf-c-compiler libonnx-dev
      python3-onnx darknet python3-torchvision python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs ONNX Runtime in tests/test_export.sh; any Node with npm will do
# (Debian's nodejs + npm, or NodeSource's nodejs, which carries npm itself).
command -v npm >/dev/null || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
