"""Benchmarks: MobileBERT's Table 7 latency benchmark (`make benchmark`):
the matrix of models, modes and threads timed by android_bench
(latency_benchmark) and its table (latency_report); and a model's TFLite
files beside ONNX Runtime's, scored and timed alike (onnx_compare)."""
