"""Recorded conversations (issue 43): the `record` option, the store format, the stores, the
writer a call ends with. The viewer is the operator's (cli/history.py), never the Lambda's."""
