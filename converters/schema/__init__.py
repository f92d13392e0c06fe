"""TFLite metadata schema and the Python classes flatc generates from it.

`metadata_schema.fbs` is the TFLite Support schema (version 1.5.0, from the
`tflite-support==0.4.4` wheel, Apache 2.0): the format the Task Library's
BertQuestionAnswerer / BertNLClassifier read. We do not install that wheel: it
pins protobuf < 4, which TensorFlow 2.21 cannot use. The generated module needs
only the `flatbuffers` package TensorFlow already depends on. Regenerate it
after changing the schema with (Debian's flatbuffers-compiler):

    flatc --python --gen-object-api --gen-onefile -o converters/schema \
        converters/schema/metadata_schema.fbs

tests/test_convert_tflite_library.py
(test_generated_schema_module_is_flatc_output) checks the file is flatc's
output.
"""
