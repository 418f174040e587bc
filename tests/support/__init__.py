"""Real servers on loopback for the tests: a fake Anthropic upstream, the gateway, moto."""
