"""Data: pre-training TFRecords, task readers and metrics, demo data build."""
