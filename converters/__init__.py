"""convert_tflite.py and the conversion library, one idea per module:

  source.py          what to convert: our model directory or a SavedModel
  export.py          fixed-shape [1, L] SavedModel in the app contract
  representative.py  calibration inputs from real text / task files
  quantize.py        TFLite conversion per mode (float32 ... int16x8)
  contract.py        input / output names, dtypes, shapes; builtin ops only
  tflite_file.py     the flatbuffer: ops, float ops, renaming, metadata
  runtime.py         LiteRT on the host: by-name runner, probe, XNNPACK
  validate.py        the report: differences, metrics, thresholds, Markdown
  metadata.py        Task Library metadata (vocab, tokenizer, tensor names)
  model_card.py      the JSON card beside each .tflite
  native_output.py   keeps the C++ converter's logging off the terminal
  schema/            TFLite metadata schema and its flatc-generated classes
"""
