"""Policy Gateway: an AI-control gateway for the Claude Messages API.

The way of a request: `app` receives it, `endpoint` admits it (`auth`) and
reads it (`body`), `messages` runs the policy chain on it, `fallback` sends it
with `upstream` (deciding on one retry of the original), and the response
policies run on the way back, in `messages` for JSON and `stream_relay` for
a stream. `call` is the one object the stages share.
"""
