#!/bin/sh
# Entry point under the AWS Lambda Web Adapter: the adapter starts this script,
# polls the readiness path, then forwards each invocation to this HTTP server.
# The same command serves the app locally (`policy-gateway serve`).
#
# Lambda's own Python bootstrap, which puts the task root and the layers
# (/opt/python) on sys.path, never runs under the adapter: add them here.
here=$(cd "$(dirname "$0")" && pwd)
# `sam build` records the architecture it installed wheels for. Built for one and
# deployed as the other, the compiled dependencies cannot load: say so plainly.
if [ -f "$here/ARCHITECTURE" ]; then
    built=$(cat "$here/ARCHITECTURE")
    case $(uname -m) in aarch64) running=arm64 ;; *) running=$(uname -m) ;; esac
    if [ "$built" != "$running" ]; then
        echo "policy-gateway: built for $built but running on $running;" \
            "build and deploy with the same Architecture parameter (docs/deploy.md)" >&2
        exit 1
    fi
fi
export PYTHONPATH="${PYTHONPATH:+${PYTHONPATH}:}${here}:/opt/python"
exec python3 -m policy_gateway serve --host 127.0.0.1 --port "${AWS_LWA_PORT:-${PORT:-8080}}"
