#!/bin/sh
# Entry point under the AWS Lambda Web Adapter: the adapter starts this script,
# polls the readiness path, then forwards each invocation to this HTTP server.
# The same command serves the app locally (`policy-gateway serve`).
exec python3 -m policy_gateway serve --host 127.0.0.1 --port "${AWS_LWA_PORT:-${PORT:-8080}}"
