"""A shipped file checked where its user takes it: the QA file through the
Android app's Python twin and the TFLite Task Library (qa_app_check), a
classifier through BertNLClassifier (classifier_app), the files on
emulated arm64 (arm64_check)."""
