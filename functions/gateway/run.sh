#!/bin/sh
# Entry point under the AWS Lambda Web Adapter: the adapter starts this script,
# polls the readiness path, then forwards each invocation to this HTTP server.
# The same command serves the app locally (`policy-gateway serve`).
#
# Lambda's own Python bootstrap, which puts the task root and the layers
# (/opt/python) on sys.path, never runs under the adapter: add them here.
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="${PYTHONPATH:+${PYTHONPATH}:}${here}:/opt/python"
exec python3 -m policy_gateway serve --host 127.0.0.1 --port "${AWS_LWA_PORT:-${PORT:-8080}}"
