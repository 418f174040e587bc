"""Policy Gateway: an AI-control gateway for the Claude Messages API.

The way of a request, folder by folder: `app` receives it; `routes/endpoint`
admits it (`auth/`) and reads it (`routes/body`); `routes/messages` runs the
policy chain on it; `fallback/send` sends it through the endpoint's one way
upstream (`upstream/`), deciding on one retry of the original; the response
policies run on the way back, in `routes/messages` for JSON and
`routes/stream_relay` for a stream. `call` is the one object the stages share,
and the modules at this level are the ones every stage may import.
"""
