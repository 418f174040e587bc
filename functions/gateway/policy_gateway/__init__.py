"""Policy Gateway: an AI-control gateway for the Claude Messages API.

The way of a request: `app` receives it, `auth` admits it, `pipeline` parses
it and runs the policy chain, `relay` sends it upstream (with `fallback` deciding on one
retry of the original), the response policies run, and `sse` frames the
stream back to the client.
"""
