#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (npm's onnxruntime-node, which carries its
# CPU library) into DIR/node_modules, if it is not there yet: the independent
# runtime tests/test_export.sh checks exported models with. --ignore-scripts:
# its install script would download more from elsewhere, and the CPU library
# is in the package itself.
set -euo pipefail
dir=${1:?usage: install-onnxruntime.sh DIR}
[ -f "$dir/node_modules/onnxruntime-node/package.json" ] && exit 0
command -v npm >/dev/null || { echo "install-onnxruntime: npm not found (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dir"
npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$dir" onnxruntime-node@1.30.0 >&2
