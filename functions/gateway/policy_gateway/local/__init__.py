"""The local run (`make run`: `policy-gateway serve --simulate-upstream --embedded-ssm`): what
stands in on this machine for what a deployed gateway reaches, started only when asked for and
never in Lambda.

standins.py (what `serve` starts, each pointed at through the environment, and the
operator's export line), simulator.py with simulated_*.py (the Messages API simulator) and
bedrock_simulator.py (Bedrock's), upstream_view.py (the simulator's line per request it
received), aws_standin.py (the embedded AWS: moto, for the AWS SDKs on this machine only),
listen.py (loopback ports claimed before anything starts). The operator's commands (cli/) start
it and read its lines; it imports none of them.
"""
