"""Where a value came from: the text flow_guard compares, and the values it looks up.

`normalise` makes the one form every text and value is compared in;
`candidates` takes the values a tool call's input carries; `conversation`
reads a request (and an answer) into trusted text and untrusted results.
"""
