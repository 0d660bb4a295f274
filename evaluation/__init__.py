"""`hindsight eval`: the memory-quality instrument (distill cases, LoCoMo, LongMemEval, MADial).

Data files are parsed and validated completely (naming the line of any problem) before anything touches
the store; each suite then runs through the real pipeline and prints a table plus one JSON line of metrics.
"""
