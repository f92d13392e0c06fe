"""The adb / host latency harness and the Android QA demo app (issue 8 onwards)."""
