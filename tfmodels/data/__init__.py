"""Data: pre-training TFRecords, task readers and metrics, the student
vocabulary learner, demo data build."""
