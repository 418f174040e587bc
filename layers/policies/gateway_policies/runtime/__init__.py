"""What runs the policies in the gateway: the chain, the loader, the diff, the SSE codec.

Policy authors never need these (`gateway_policies.testing` runs a policy through them).
"""
