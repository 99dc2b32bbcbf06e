"""Fuser: splits a trace partition into groups that are safe to run as one kernel, and builds them."""
