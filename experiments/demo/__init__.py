"""`make demo`: ship on the real MiniLM teacher, once per shipped task, and
one report of both runs. command (flags), steps (the plan), data (the tiny
scale's slices), results (what the ship runs measured), report."""
