"""`make bench`: bench/run.py is the entry point (`python -m bench.run`)."""
