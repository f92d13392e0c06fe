"""The product: `python -m experiments.ship` takes a user's fine-tuned
teacher to a phone-ready int8 student within a budget. command (flags,
plan), steps (what runs), teacher (import and checks), split_search and
split_budget (which student fits), student_recipe (how a student is
trained), report and figures (REPORT.md, report/summary.json)."""
