"""Shared pytest set-up: TensorFlow backend, quiet logs, a fixed seed and a fresh Keras session;
shared fixtures: a seeded NumPy generator, and one small model for the export and serving tests
(its directory, its export and the in-process test double serving that)."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402  (the backend must be chosen before Keras is imported)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_transformer import malloc  # noqa: E402

malloc.keep_freed_memory()  # as every command does (keras_transformer.cli.common.run)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(items):
    """Marks the tests that `stages.py` moves out of the default stage: `slow`, and `serial`
    for those CI's slow stage runs one at a time."""
    from stages import stage_of

    for item in items:
        stage = stage_of(item.nodeid)
        if stage:
            item.add_marker(pytest.mark.slow)
        if stage == "serial":
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def _seeded_fresh_session():
    """Every test starts from seed 0 and leaves no layers or name counters behind. Without a
    full garbage collection after each test (`free_memory=False`): with TensorFlow loaded one
    took about 0.5 s, 312 of the default stage's 856 test-seconds; Python's own collector
    still frees what the tests leave."""
    keras.utils.set_random_seed(0)
    yield
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def background():
    """`background(command, log_stem)`: a `runs.Background` run beside the test's own, killed
    at the test's end if it still runs (a test that failed before reading its result)."""
    from keras_transformer.testing.runs import Background

    started = []

    def start(command, log_stem):
        started.append(Background(command, log_stem))
        return started[-1]

    yield start
    for run in started:
        run.stop()


@pytest.fixture
def rng() -> np.random.Generator:
    """A NumPy generator seeded with 0, fresh for each test."""
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def one_layer_model_dir(tmp_path_factory) -> str:
    """`make_model_dir` with one layer (its default is 2): the untrained model of the export and
    serving tests, which do not depend on the depth and trace, export and load faster with one.
    Read-only: a test that needs other weights makes its own."""
    from keras_transformer.testing.model_dir import make_model_dir

    return make_model_dir(str(tmp_path_factory.mktemp("one_layer_model")), num_layers=1)


@pytest.fixture(scope="session")
def serving_export_dir(one_layer_model_dir, tmp_path_factory) -> str:
    """A SavedModel export (`transformer/1`: beam 2, n-best 2, the guided signatures, ops not
    checked: test_export and test_guided_serving check them) of `one_layer_model_dir`;
    read-only. Shared by test_client.py and
    test_serving_load.py: a worker exports once, not once per file."""
    from keras_transformer import SearchOptions
    from keras_transformer.serving.export import export_savedmodel

    base = str(tmp_path_factory.mktemp("serving"))
    return export_savedmodel(
        one_layer_model_dir, base, "transformer", search=SearchOptions(beam_size=2), n_best=2,
        check_ops=False, guided=True,
    )  # fmt: skip


@pytest.fixture(scope="session")
def serving_service(serving_export_dir):
    """The in-process TF Serving test double over `serving_export_dir` (model "transformer"),
    loaded once. A test that changes it (e.g. its `delay_s`) restores it."""
    from keras_transformer.testing.serving_double import SavedModelPredictionService

    return SavedModelPredictionService(serving_export_dir, model_name="transformer")
