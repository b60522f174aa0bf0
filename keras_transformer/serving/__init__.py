"""TensorFlow Serving: the SavedModel export (`export`), its gRPC/REST client (`client`),
the check of an export against the in-process Translator (`verify`), and the names both ends
share (`signatures`). See BUILD.md.

Import the submodules you need: `signatures` and `client` load TensorFlow only when a request
is built or parsed, `export` and `verify` load it at import.
"""
