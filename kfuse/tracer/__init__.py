"""Tracer: delays kernel calls into a versioned trace and runs exactly what a host read needs."""
