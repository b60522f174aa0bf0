"""SavedModel export for TensorFlow Serving and its clients (see BUILD.md).

`export_savedmodel.py` writes `EXPORT_BASE/<model_name>/<version>/`; `client.py` queries a
running `tensorflow_model_server` over gRPC or REST. Both are also command-line scripts.
"""
