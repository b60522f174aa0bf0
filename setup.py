"""Install keras-transformer: `pip install -e ".[dev,serving]"`."""

from setuptools import find_packages, setup

setup(
    name="keras-transformer",
    version="0.1.0",
    description=(
        "The Transformer of 'Attention Is All You Need' in Keras 3 / TensorFlow: "
        "layers, training, beam search and TF Serving export."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_transformer", "keras_transformer.*"]),
    package_data={"keras_transformer": ["data/sample/*"]},
    include_package_data=True,
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "keras>=3.12",
        "tensorflow-text>=2.21,<2.22",
        "tensorflow-datasets>=4.9",
        # TFDS' download manager imports it (dataset_builder.code_path) but TFDS declares it
        # only for Python < 3.9: without it WMT dies before its first download.
        "importlib_resources",
        "sentencepiece>=0.2",
        "sacrebleu>=2.4",
        "numpy",
        "matplotlib>=3.7",
        "tqdm",
        "tensorboard",
    ],
    entry_points={
        "console_scripts": [
            # keras_transformer/cli/train.py: where pipelines/train_wmt.py's code moves
            "keras-transformer-train = keras_transformer.cli.train:main",
            "keras-transformer-evaluate = keras_transformer.cli.evaluate:main",
            "keras-transformer-prepare-data = keras_transformer.cli.prepare_data:main",
            "keras-transformer-translate = keras_transformer.cli.translate:main",
            "keras-transformer-score = keras_transformer.cli.score:main",
            "keras-transformer-plot-attention = keras_transformer.cli.plot_attention:main",
            "keras-transformer-average-checkpoints = "
            "keras_transformer.cli.average_checkpoints:main",
            "keras-transformer-export = keras_transformer.cli.export:main",
            "keras-transformer-verify-export = keras_transformer.cli.verify_export:main",
            "keras-transformer-client = keras_transformer.cli.client:main",
            "keras-transformer-align-corpus = keras_transformer.cli.align_corpus:main",
        ]
    },
    extras_require={
        # pytest-xdist: pyproject.toml runs the tests on every core (`-n auto`)
        "dev": ["pytest>=8", "pytest-xdist>=3.5", "ruff>=0.6"],
        "serving": ["tensorflow-serving-api>=2.21,<2.22", "grpcio>=1.60"],
        # tests/test_backends.py; torch==2.13.0 is the CPU build that installs here (other
        # versions pull gigabytes of CUDA packages)
        "backends": ["jax", "torch==2.13.0"],
        # export/to_ctranslate2.py and tests/test_ctranslate2.py (.ci/run installs it)
        "ctranslate2": ["ctranslate2>=4.5,<5", "sentencepiece"],
        # pipelines/align_corpus.py (eflomal word alignments for --guided-alignment) and
        # tests/test_guided_alignment.py's aligner test (.ci/run installs it)
        "align": ["eflomal>=2.0,<3"],
        # The peers of the benchmarks (`python benchmarks/run.py train --with-peers`, `learning`),
        # never needed by the package: PyTorch (torch==2.13.0 installs the local CPU build
        # here; other versions pull gigabytes of CUDA packages), CTranslate2, transformers, and
        # what TF Model Garden needs beyond ours: tf-keras, gin-config and seven of
        # tf-models-official 2.20.0's own requirements (their lower bounds) that a fresh
        # environment lacks: scipy (`official.nlp.modeling` imports it), pyyaml
        # (`official.core`), immutabledict, tf-slim, pandas, psutil and py-cpuinfo.
        # tf-models-official itself is not listed: 2.20.0 requires
        # tensorflow~=2.20.0 and tensorflow-text~=2.20.0, so it goes in apart with
        # `pip install --no-deps tf-models-official==2.20.0` (benchmarks/README.md).
        "bench": [
            "tf-keras>=2.21,<2.22",
            "gin-config>=0.5",
            "scipy>=0.19.1",
            "immutabledict",
            "tf-slim>=1.1.0",
            "pandas>=0.22.0",
            "psutil>=5.4.3",
            "py-cpuinfo>=3.3.0",
            "pyyaml>=6.0.0",
            "torch==2.13.0",
            "ctranslate2>=4.5",
            "transformers",
        ],
    },
)
