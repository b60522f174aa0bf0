"""`onednn.prefer_onednn`: oneDNN's kernels asked for before TensorFlow starts, the user's
choice kept, and the commands asking before they import TensorFlow."""

import argparse
import os
import sys

import pytest

from keras_transformer import onednn
from keras_transformer.cli import common


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as if TensorFlow were not imported yet, on an x86-64 machine, with no
    choice made."""
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.setattr(onednn.platform, "machine", lambda: "x86_64")
    monkeypatch.delenv(onednn.ENV_VAR, raising=False)


def test_asks_for_onednn_before_tensorflow_starts(fresh_process):
    assert onednn.prefer_onednn() is True
    assert os.environ[onednn.ENV_VAR] == "1"


@pytest.mark.parametrize("value", ["0", "false", "1"])
def test_the_users_choice_wins(fresh_process, monkeypatch, value):
    monkeypatch.setenv(onednn.ENV_VAR, value)
    assert onednn.prefer_onednn() is False
    assert os.environ[onednn.ENV_VAR] == value


def test_no_effect_once_tensorflow_is_imported(fresh_process, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", object())
    assert onednn.prefer_onednn() is False
    assert onednn.ENV_VAR not in os.environ


def test_other_architectures_keep_tensorflows_choice(fresh_process, monkeypatch):
    monkeypatch.setattr(onednn.platform, "machine", lambda: "aarch64")
    assert onednn.prefer_onednn() is False
    assert onednn.ENV_VAR not in os.environ


def test_commands_ask_before_they_start_tensorflow(fresh_process):
    seen = {}

    def command(args):
        seen["value"] = os.environ.get(onednn.ENV_VAR)
        seen["tensorflow"] = "tensorflow" in sys.modules
        return 0

    parser = argparse.ArgumentParser()
    parser.add_argument("--debug", action="store_true")
    assert common.run(parser, command, [], tensorflow=False) == 0
    assert seen == {"value": "1", "tensorflow": False}
