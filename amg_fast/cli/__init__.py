"""Command-line tools: the console scripts amg-fast-train, amg-fast-evaluate, amg-fast-generate and
amg-fast-reproduce, and scripts/{train,evaluate,generate_data,reproduce}.py, run these mains."""
