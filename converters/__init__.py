"""Stage 2: convert_tflite.py and the conversion library, one idea per module.

Imports only tfmodels (stage 1); the harness and experiments import it.

  source.py          what to convert: our model directory or a SavedModel
  conversion.py      the chain: fold NoNorms -> export -> convert per mode
  export.py          fixed-shape [1, L] SavedModel in the app contract
  representative.py  calibration inputs from real text / task files
  quantize.py        the registry of modes (MODES), TFLite conversion per
                     mode and recipe
  fast_int8.py       the int8 recipe XNNPACK runs in one partition
  qat.py             quantization-aware training: int8 from learned ranges
  nonorm_folding.py  NoNorms folded exactly into neighbouring weights
  contract.py        input / output names, dtypes, shapes; builtin ops only
  tflite_file.py     the flatbuffer: ops, float ops, renaming, metadata
  runtime.py         LiteRT on the host: by-name runner, probe, XNNPACK
  delegates.py       which nodes a LiteRT delegate took (harness too)
  validate.py        the report: differences, metrics, thresholds, Markdown
  metadata.py        Task Library metadata (vocab, tokenizer, tensor names)
  model_card.py      the JSON card beside each .tflite
  native_output.py   keeps the C++ converter's logging off the terminal
  schema/            TFLite metadata schema and its flatc-generated classes
"""

import tfmodels  # noqa: F401  first: TensorFlow's Keras is tf-keras
