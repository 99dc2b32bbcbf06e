"""Front end: Python workunit source -> parsed, located kernel ASTs (the kernel IR) and their access summaries."""
