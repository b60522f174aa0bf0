"""The checks of what a request sends (data/input_checks.py, the guides of decoding/guided.py,
the sampling knobs of decoding/sampling.py): bad values refused with a message that names
them, good ones passed unchanged. References: Python's own strict UTF-8 decoder, and the
values as sent."""

import math
import random
import re

import pytest
import tensorflow as tf

from keras_transformer.constants import UNK_ID
from keras_transformer.data.input_checks import check_size, check_utf8
from keras_transformer.decoding.guided import GuideLimits, guide_fields, spelled_phrases
from keras_transformer.decoding.sampling import check_sampling_args, sampling_tensors
from keras_transformer.serving.signatures import sampling_inputs
from keras_transformer.tracing import graph_function


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _byte_strings(count: int, seed: int = 0) -> list[bytes]:
    """Valid UTF-8 of random code points (every length of encoding), some of them damaged:
    cut inside a character, a byte flipped or inserted, an encoded surrogate, an overlong
    form, a code point past U+10FFFF."""
    rng = random.Random(seed)
    planes = [(0x20, 0x7F), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000)]
    damage = [
        lambda b: b[: rng.randrange(len(b))] if len(b) > 1 else b"\xc3",
        lambda b: b + bytes([rng.randrange(0x80, 0x100)]),
        lambda b: b[:1] + bytes([rng.randrange(256)]) + b[1:],
        lambda b: b + b"\xed\xa0\x80",  # U+D800 encoded
        lambda b: b + b"\xc0\xaf",  # "/" in two bytes
        lambda b: b + b"\xf4\x90\x80\x80",  # U+110000
        lambda b: b,
    ]
    strings = []
    for _ in range(count):
        chars = [chr(rng.randrange(*rng.choice(planes))) for _ in range(rng.randrange(1, 6))]
        data = "".join(c for c in chars if not 0xD800 <= ord(c) < 0xE000).encode() or b"a"
        strings.append(rng.choice(damage)(data))
    return strings


def test_utf8_check_agrees_with_pythons_strict_decoder():
    strings = _byte_strings(400)
    assert 40 < sum(map(_is_utf8, strings)) < 360  # both kinds are well represented
    check = graph_function(lambda t: check_utf8(t, "prefix"))
    for data in strings:
        try:
            out = check(tf.constant([data])).numpy()[0]
            accepted = True
        except tf.errors.InvalidArgumentError as error:
            accepted = False
            assert "prefix is not valid UTF-8" in error.message
        assert accepted == _is_utf8(data), data
        if accepted:
            assert out == data  # passed unchanged


def test_utf8_check_names_the_rows_and_quotes_them_as_valid_text():
    texts = tf.constant([b"ok", b"caf\xc3", "fine \u00e9 \U0001f600".encode(), b"\xff x"])
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        graph_function(lambda t: check_utf8(t, "glossary"))(texts)  # as a served request runs
    message = caught.value.message
    assert re.search(r"glossary is not valid UTF-8.*\[1 3\] \[caf\ufffd \ufffd x\]", message)
    message.encode("utf-8")  # the message itself is text
    assert check_utf8(tf.constant(["\ufffd stays", "\x00"]), "x").numpy().tolist() == [
        "\ufffd stays".encode(),
        b"\x00",
    ]


def test_size_check_names_the_input_limit_and_lengths():
    assert check_size(tf.constant(["abc", ""]), 3, "input").numpy().tolist() == [b"abc", b""]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)source longer than "
                       r"max_input_bytes=3 bytes.*\[2 4\]"):  # fmt: skip
        check_size(tf.constant(["ab", "abcd"]), 3, "source", "max_input_bytes")


def _sampling_error(**values) -> str:
    """The message of the knobs' checks ("" if they pass), run as a served request runs them."""
    knobs = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, **values}

    @tf.function
    def checked():
        temperature, top_k, top_p, checks = sampling_tensors(**knobs)
        with tf.control_dependencies(checks):
            return tf.identity(temperature)

    try:
        checked()
    except tf.errors.InvalidArgumentError as error:
        return error.message
    return ""


@pytest.mark.parametrize(
    "name, value",
    [("temperature", 0.0), ("temperature", -1.0), ("temperature", math.nan),
     ("temperature", math.inf), ("temperature", 1e-39), ("top_k", -1), ("top_p", 0.0),
     ("top_p", 1.5), ("top_p", math.nan)],
)  # fmt: skip
def test_sampling_knobs_out_of_range_are_refused_naming_the_value_sent(name, value):
    dtype = tf.int64 if name == "top_k" else tf.float64
    message = _sampling_error(**{name: tf.constant(value, dtype)})
    assert f"{name} must be" in message and f"Received: {name}=" in message
    if value == 1e-39:  # 0 as a float32 (flushed to zero): the message shows what was sent
        assert "1e-39" in message


def test_sampling_knobs_in_range_pass_and_top_k_never_wraps():
    for temperature in (1e-30, 0.7, 1e30):
        assert _sampling_error(temperature=tf.constant(temperature, tf.float64)) == ""
    for sent in (0, 5, 2**31 - 1, 2**31, 2**32 + 5, 2**62):
        _, top_k, _, _ = sampling_tensors(1.0, tf.constant(sent, tf.int64), 1.0)
        assert int(top_k) == min(sent, 2**31 - 1)  # 2**32 + 5 must not become 5
    temperature, _, top_p, _ = sampling_tensors(tf.constant(0.5, tf.float64), 0, 0.25)
    assert (temperature.dtype, float(temperature), float(top_p)) == (tf.float32, 0.5, 0.25)


@pytest.mark.parametrize("temperature", [math.inf, math.nan, 0.0])
def test_python_sampling_values_must_be_finite_and_positive(temperature):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        check_sampling_args("sample", 0, 1.0, temperature)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sampling_inputs("sample", temperature=temperature)


def test_guides_need_one_row_per_text_and_valid_utf8():
    text = tf.constant(["a", "b"])
    filled = guide_fields(text, (None, ["x", "y"], None, None), GuideLimits())
    assert [f.numpy().tolist() for f in filled] == [[b"", b""], [b"x", b"y"], [b"", b""],
                                                      [b"", b""]]  # fmt: skip
    for index, name in enumerate(("prefix", "constraints", "avoid", "glossary")):
        fields = [None] * 4
        fields[index] = tf.constant(["only one"])
        rows = rf"(?s){name} must have one row per text.*\[1\].*\[2\]"
        with pytest.raises(tf.errors.InvalidArgumentError, match=rows):
            guide_fields(text, fields, GuideLimits())
        fields[index] = tf.constant([b"ok", b"Sch\xc3"])
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} is not valid UTF-8"):
            guide_fields(text, fields, GuideLimits())


def test_constraints_the_vocabulary_cannot_spell_are_dropped_and_flagged():
    ids = tf.ragged.constant([[[7, 8], [UNK_ID, 9]], [], [[10, 11, 12]], [[UNK_ID]]],
                             dtype=tf.int32, ragged_rank=2)  # fmt: skip
    kept, unspellable = spelled_phrases(ids)
    assert kept.to_list() == [[[7, 8]], [], [[10, 11, 12]], []]
    assert unspellable.numpy().tolist() == [True, False, False, True]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "0.6", None])
def test_number_settings_must_be_finite_numbers(value):
    from keras_transformer.checks import check_number

    with pytest.raises(ValueError, match=r"x must be a finite number\. Received: x="):
        check_number("x", value)


@pytest.mark.parametrize("alpha", [math.nan, -0.1, math.inf])
def test_length_penalty_alpha_is_finite_and_not_negative(alpha):
    from keras_transformer import SearchOptions

    with pytest.raises(ValueError, match=r"alpha must be a finite number >= 0\. Received"):
        SearchOptions(alpha=alpha)
    assert SearchOptions(alpha=0).alpha == 0


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".", "..", ".hidden", "a b", "x\n"])
def test_export_model_name_is_one_url_safe_directory(name, tmp_path):
    from keras_transformer.serving.export import check_model_name, export_savedmodel

    with pytest.raises(ValueError, match=r"model_name must be one directory name.*Received"):
        export_savedmodel(str(tmp_path / "no_run"), str(tmp_path), model_name=name)
    assert list(tmp_path.iterdir()) == []  # refused before anything is read or written
    for good in ("transformer", "en-de_v2", "m.1"):
        assert check_model_name(good) == good


def test_commands_print_a_refused_request_as_one_error_line(capsys):
    import argparse

    from keras_transformer.cli.common import USER_ERROR_STATUS, run
    from keras_transformer.data.input_checks import check_utf8

    def command(args):  # a request refused inside a traced function, as translate's are
        graph_function(lambda t: check_utf8(t, "prefix"))(tf.constant([b"ok", b"Sch\xc3"]))
        return 0

    parser = argparse.ArgumentParser()
    parser.add_argument("--debug", action="store_true")
    assert run(parser, command, [], tensorflow=False) == USER_ERROR_STATUS
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: assertion failed: [prefix is not valid UTF-8") and "\n" not in err
    assert "[1] [Sch\ufffd]" in err and "{{" not in err
    with pytest.raises(tf.errors.InvalidArgumentError):  # --debug: the whole traceback
        run(parser, command, ["--debug"], tensorflow=False)


@pytest.mark.parametrize(
    "section, field, value",
    [("RecipeConfig", "learning_rate_scale", 0.0),
     ("RecipeConfig", "learning_rate_scale", math.inf),
     ("RecipeConfig", "seed", -1), ("RecipeConfig", "seed", 2**32),
     ("RecipeConfig", "train_minutes", math.nan), ("EvaluationConfig", "eval_limit", -5),
     ("EvaluationConfig", "eval_alpha", -0.5)],
)  # fmt: skip
def test_training_settings_out_of_range_are_refused_by_name(section, field, value):
    from keras_transformer.config import sections

    config_class = getattr(sections, section)
    config_class(**{field: 0 if field == "eval_limit" else config_class().__dict__[field]})
    with pytest.raises(ValueError, match=rf"{field} must be .*Received: {field}="):
        config_class(**{field: value})


@pytest.mark.parametrize("texts", [None, 5, ["ok", None], ["ok", 3.5], [["nested"]]])
def test_translator_texts_must_be_strings(texts):
    from keras_transformer.decoding.translator import text_list

    with pytest.raises(TypeError, match="texts must be a string or a sequence of strings"):
        text_list(texts)
    assert text_list("one") == ["one"] and text_list((b"a", "b")) == [b"a", "b"]


def test_translator_n_best_must_be_positive(one_layer_model_dir):
    from keras_transformer import SearchOptions
    from keras_transformer.artifacts import load_trained
    from keras_transformer.decoding import Translator

    model, _, tokenizer = load_trained(one_layer_model_dir)
    translator = Translator(model, tokenizer, SearchOptions(beam_size=2))
    with pytest.raises(ValueError, match="n_best must be an int >= 1. Received: n_best=0"):
        translator(["The cat."], n_best=0)  # was the 1-best list, as if n_best were 1
    with pytest.raises(TypeError, match="Received: texts=None"):
        translator.translate(None)


def test_command_line_files_read_as_python_text_mode_reads_them(tmp_path):
    # The reference: Python's text mode (universal newlines, strict UTF-8) on random files of
    # \n, \r\n and \r line ends, multi-byte characters and, in some, a byte that is not UTF-8.
    from keras_transformer.cli.common import read_lines, read_text

    rng = random.Random(0)
    pieces = [b"a", b" ", b"\n", b"\r\n", b"\r", "é".encode(), "日本".encode(), b"\t", b"\xff"]
    for index in range(60):
        choices = pieces if index % 3 == 0 else pieces[:-1]  # a third hold a bad byte
        data = b"".join(rng.choice(choices) for _ in range(30))
        path = tmp_path / f"{index}.txt"
        path.write_bytes(data)
        try:
            with open(path, encoding="utf-8") as f:
                want = [line.rstrip("\n") for line in f]
        except UnicodeDecodeError:
            bad = data.index(b"\xff")
            line = data[:bad].replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
            column = len(data[:bad].replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[-1])
            for read in (read_lines, read_text):
                with pytest.raises(ValueError, match=f"{path} line {line} is not valid UTF-8: "
                                   f"byte 0xff at byte {column + 1} of the line"):  # fmt: skip
                    read(str(path))
            continue
        assert read_lines(str(path)) == want
        assert read_text(str(path)) == data.decode("utf-8")


@pytest.mark.parametrize("bad", [-1, -4000, 100])
def test_source_ids_outside_the_vocabulary_are_refused_naming_the_id(bad):
    import keras

    from keras_transformer import SearchOptions, Transformer, TransformerConfig
    from keras_transformer.decoding import translate_ids

    keras.utils.set_random_seed(0)
    model = Transformer(TransformerConfig.tiny(vocab_size=100))
    options = SearchOptions(beam_size=2, max_extra_length=2)
    good = tf.constant([[5, 6, 2], [7, 2, 0]])
    expected = translate_ids(model, good, options)
    source = tf.tensor_scatter_nd_update(good, [[1, 0]], [bad])  # wrapped, before the check
    with pytest.raises(ValueError, match=rf"in \[0, vocab_size=100\)\. Received: an id {bad}$"):
        translate_ids(model, source, options)
    with pytest.raises(ValueError, match=f"an id {bad}$"):
        translate_ids(model, tf.ragged.constant([[5, 6, 2], [bad, 2]]), options)
    graph = graph_function(lambda ids: translate_ids(model, ids, options))
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"Received: an id.*{bad}"):
        graph(source)
    for got, want in zip(graph(good), expected):  # in range: unchanged
        assert got.numpy().tolist() == want.numpy().tolist()
