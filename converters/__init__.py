"""convert_tflite.py and the conversion library (issue 6 onwards)."""
