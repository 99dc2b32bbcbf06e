"""``python -m kfuse.bench``: fusion speedups per fused group (unfused vs fused UO vs fused O), end-to-end
times eager vs fused, tracing overhead and compile/cache-load times, next to the PyFuser paper's CPU figures."""
