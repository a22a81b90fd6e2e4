#!/bin/sh
# Validates the Kubernetes manifests in assets/ against real schemas:
# the DaemonSet with kubernetes-validate (PyPI; Kubernetes' own OpenAPI
# schemas, strict: unknown fields are errors), the PodMonitor with the
# Prometheus Operator's CRD schema (@kubernetes-models/prometheus-operator,
# npm). Installs both into a cache directory on first use.
#
#   scripts/validate-manifests.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${KITTY_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kitty-tools}
mkdir -p "$cache"
if command -v kubernetes-validate >/dev/null; then
    kv=kubernetes-validate
else
    if [ ! -d "$cache/py/kubernetes_validate" ]; then
        python3 -m pip install -q --disable-pip-version-check --target "$cache/py" \
            kubernetes-validate >/dev/null 2>&1
    fi
    export PYTHONPATH="$cache/py${PYTHONPATH:+:$PYTHONPATH}"
    kv="python3 -m kubernetes_validate"
fi
$kv --strict --quiet "$root/assets/kitty-daemonset.yaml"
if [ ! -d "$cache/npm/node_modules/@kubernetes-models/prometheus-operator" ]; then
    mkdir -p "$cache/npm"
    (cd "$cache/npm" && npm install --silent --no-audit --no-fund \
        @kubernetes-models/prometheus-operator@6 js-yaml@4 >/dev/null)
fi
# Run from the cache so that the packages resolve (they are ES modules).
cat > "$cache/npm/validate-podmonitor.mjs" <<'JS'
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
import * as yaml from "js-yaml";
import fs from "fs";
new PodMonitor(yaml.load(fs.readFileSync(process.argv[2], "utf8"))).validate();
JS
node "$cache/npm/validate-podmonitor.mjs" "$root/assets/kitty-podmonitor.yaml"
echo "manifests valid: assets/kitty-daemonset.yaml (Kubernetes, strict), assets/kitty-podmonitor.yaml (PodMonitor CRD)"
