"""The pending trace (trace.py) and what failed delayed calls leave behind (failures.py)."""
