"""Built-in policies, each in its own module and imported only when configured."""
