"""What Spark's Python workers run: the stateful step (entity_step), the per-entity records and
the fold of one event into one (records), the transitions it counts (transitions, history) and
their Arrow form on the way to the driver (arrow). Pure, but for the step's pandas frames: its
imports are what the workers need, and what they import before forking (streaming/pydaemon.py)."""
