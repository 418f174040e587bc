"""How the artifacts are built: the locks (locks.py) and `sam build` (sam_build.py)."""
