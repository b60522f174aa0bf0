"""The one-sentence latency benchmark's choice of sentences and its percentiles."""

import numpy as np
import pytest

from benchmarks.latency_benchmark import percentiles, pick_sentences


def _words(text: str) -> int:
    return len(text.split())


def test_picks_the_nearest_lengths_and_joins_lines_where_too_few_are_long():
    texts = [" ".join(["w"] * n) for n in (3, 5, 6, 9, 20, 4, 5, 2, 2, 2, 2)]
    near = pick_sentences(texts, _words, target=5, per_length=3)
    assert [_words(t) for t in near] == [5, 5, 6]  # within 20 % (at least 1), nearest first
    long = pick_sentences(texts, _words, target=20, per_length=3)
    assert _words(long[0]) == 20  # the one near enough
    assert len(long) == 3 and all(_words(t) >= 20 for t in long[1:])  # consecutive lines joined
    assert long[1] == " ".join(texts[:4])  # 3 + 5 + 6 + 9 = 23 >= 20
    odd = [t for t in texts if _words(t) % 2]
    odd = pick_sentences(odd, _words, target=20, per_length=3, join=False)
    assert [_words(t) for t in odd] == [9, 5, 5]  # nearest whatever the distance, never joined


def test_one_sentence_lines_drops_lines_the_segmenter_splits_and_keeps_order():
    from benchmarks.latency_benchmark import one_sentence_lines

    texts = ["One short line.", "The first sentence is here. The second one follows it.",
             "Another line without a stop", "Dr. Smith arrived at noon."]  # fmt: skip
    assert one_sentence_lines(texts) == [texts[0], texts[2], texts[3]]


def test_percentiles_are_numpy_s_in_milliseconds():
    times = [0.010, 0.020, 0.030, 0.040, 0.100]
    got = percentiles(times)
    assert got["p50_ms"] == 1e3 * np.percentile(times, 50) == 30.0
    np.testing.assert_allclose(got["p90_ms"], 1e3 * np.percentile(times, 90))


def test_throughput_rows_count_each_systems_own_output_pieces():
    from benchmarks.latency_benchmark import throughput_rows

    systems = {  # two fake systems: one answers in bytes (a tensor's), one in str, of 1 and 2 words
        "short": lambda texts: [b"a" for _ in texts],
        "long": lambda texts: ["a b" for _ in texts],
        "_server": None,  # not a system
    }
    rows = throughput_rows(systems, ["x"] * 5, batch=2, rounds=2, count_pieces=lambda out: sum(
        _words(t) for t in out))  # fmt: skip
    by = {row["system"]: row for row in rows}
    assert set(by) == {"short", "long"}
    calls = []
    throughput_rows({"a": lambda texts: calls.append(list(texts)) or texts}, list("uvwxy"), 2, 2)
    chunks = [["u", "v"], ["w", "x"], ["y"]]
    assert calls == chunks * 3  # a warm-up pass over every batch (XLA compiles each), 2 rounds
    assert (by["short"]["output_pieces"], by["long"]["output_pieces"]) == (5, 10)
    for row in rows:
        assert row["output_pieces_per_s"] == row["output_pieces"] * row["median"] / 5


def test_latency_rows_warm_every_system_with_every_sentence_once_before_timing():
    from benchmarks.latency_benchmark import latency_rows

    calls = {"a": [], "b": []}
    systems = {name: (lambda texts, name=name: calls[name].append(list(texts)))
               for name in calls}  # fmt: skip
    systems["_server"] = None
    sentences = {5: ["w w w w w", "w w w", "w w w w w w"], 20: ["x " * 19, "w w w", "x " * 21]}
    rows = latency_rows(systems, sentences, rounds=2)
    warm = [["w w w w w"], ["w w w"], ["w w w w w w"], ["x " * 19], ["x " * 21]]  # no repeats
    for name in calls:
        assert calls[name][:5] == warm  # untimed
        assert len(calls[name]) == 5 + 2 * 6  # then every sentence once a round, one at a time
    assert {(r["system"], r["length"], r["requests"]) for r in rows} == {
        (name, n, 2 * len(texts)) for name in calls for n, texts in sentences.items()
    }


def test_latency_rows_sleep_idle_seconds_before_each_timed_request_only(monkeypatch):
    from benchmarks import latency_benchmark

    events = []
    monkeypatch.setattr(latency_benchmark.time, "sleep", lambda s: events.append(("sleep", s)))
    systems = {"a": lambda texts: events.append(("call", texts[0]))}
    rows = latency_benchmark.latency_rows(systems, {5: ["u", "v"]}, rounds=2, idle_s=0.05)
    assert events[:2] == [("call", "u"), ("call", "v")]  # warm-up: no pauses
    assert events[2:] == [("sleep", 0.05), ("call", "u"), ("sleep", 0.05), ("call", "v")] * 2
    assert rows[0]["requests"] == 4
    events.clear()
    latency_benchmark.latency_rows(systems, {5: ["u"]}, rounds=1)
    assert ("sleep", 0.05) not in events and len(events) == 2  # idle 0: no sleep at all


@pytest.mark.parametrize(
    "argv, cores, expected",
    [
        ([], 2, (1, None)),  # latency: one thread and the cores
        ([], 1, (None,)),  # one core: the same worker twice otherwise
        (["--throughput", "64"], 2, (None,)),
        (["--peer-threads", "2", "1", "2"], 2, (None, 1)),  # the cores' count is None, once
        (["--peer-threads", "3"], 2, (3,)),
    ],
)
@pytest.mark.parametrize("side", ["peer", "our"])
def test_thread_counts_default_by_workload_and_flag(monkeypatch, argv, cores, expected, side):
    """CTranslate2's workers (`--peer-threads`) and ours (`--our-threads`) by the same rule."""
    import argparse

    from benchmarks import latency_benchmark

    monkeypatch.setattr(latency_benchmark.os, "cpu_count", lambda: cores)
    parser = argparse.ArgumentParser()
    parser.add_argument("--throughput", type=int, default=None)
    parser.add_argument(f"--{side}-threads", type=int, nargs="+", default=None)
    argv = [a.replace("--peer-", f"--{side}-") for a in argv]
    counts = getattr(latency_benchmark, f"{side}_threads")
    assert counts(parser.parse_args(argv)) == expected
    names = [latency_benchmark.thread_tail(n) for n in expected]
    assert names == ["" if n is None else f", {n} thread{'s' * (n > 1)}" for n in expected]


def test_peer_threads_below_one_negative_idle_and_extra_length_are_refused(capsys):
    import argparse

    from benchmarks import latency_benchmark

    with pytest.raises(SystemExit, match="--peer-threads must each be at least 1. Received: 0"):
        latency_benchmark.peer_threads(argparse.Namespace(peer_threads=[1, 0], throughput=None))
    with pytest.raises(SystemExit):
        latency_benchmark.main(["--idle-ms", "-5"])
    assert "--idle-ms must be at least 0. Received: -5.0" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="Received: 0"):  # before any model is made or run
        latency_benchmark.main(["--no-peers", "--peer-threads", "0"])
    with pytest.raises(SystemExit):
        latency_benchmark.main(["--no-peers", "--max-extra-length", "-1"])
    assert "--max-extra-length must be at least 0. Received: -1" in capsys.readouterr().err


def test_ctranslate2_workers_translate_as_ctranslate2_in_process_and_time_themselves(tmp_path):
    """Each compute type in a spawned process (`benchmarks.ctranslate2_process`): the same
    translations as a `ctranslate2.Translator` here with the same options; the seconds are
    the worker's own; `timed_call` reports them instead of the wall time. A worker pair for
    each thread count and each patience (`--peer-patience`; 1, CTranslate2's default, and the
    cores without a name tail). This model's outputs all run to the length limit, so its
    patience cannot change them: `test_a_ctranslate2_worker_passes_its_patience_to_translate_batch`
    checks that it reaches `translate_batch`."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    sentencepiece = pytest.importorskip("sentencepiece")
    from benchmarks.latency_benchmark import ctranslate2_systems, timed_call
    from keras_transformer import SearchOptions, artifacts
    from keras_transformer.serving.ctranslate2_export import (
        export_ctranslate2,
        sentencepiece_pieces,
    )
    from keras_transformer.testing.model_dir import SENTENCES, make_model_dir

    run = make_model_dir(str(tmp_path / "run"))
    model, _, _ = artifacts.load_trained(run)
    spm = artifacts.path(run, artifacts.TOKENIZER_FILE)
    search = SearchOptions(beam_size=2, alpha=0.6, max_extra_length=5)
    systems = ctranslate2_systems(model, spm, search, threads=(None, 1), patiences=(1.0, 1000.0))
    assert set(systems) == {
        f"CTranslate2 {kind}{threads}{patience}"
        for kind in ("float32", "int8")
        for threads in ("", ", 1 thread")
        for patience in ("", ", patience 1000")
    }
    texts = list(SENTENCES[:3])
    outputs, seconds = timed_call(systems["CTranslate2 float32"], texts)
    processor = sentencepiece.SentencePieceProcessor(model_file=spm)
    path = export_ctranslate2(model, str(tmp_path / "ct2"), sentencepiece_pieces(spm))
    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32")
    tokens = processor.encode(texts, out_type=str)
    options = dict(beam_size=2, length_penalty=0.6,
                   max_decoding_length=max(map(len, tokens)) + 1 + 5)  # fmt: skip
    results = translator.translate_batch(tokens, **options)
    assert outputs == processor.decode([r.hypotheses[0] for r in results])
    assert timed_call(systems["CTranslate2 float32, 1 thread"], texts)[0] == outputs
    results = translator.translate_batch(tokens, patience=1000.0, **options)
    patient = timed_call(systems["CTranslate2 float32, patience 1000"], texts)[0]
    assert patient == processor.decode([r.hypotheses[0] for r in results])
    assert 0 < seconds < 60
    assert len(timed_call(systems["CTranslate2 int8"], texts[:1])[0]) == 1
    for worker in systems.values():
        worker.close()


def test_a_ctranslate2_worker_passes_its_patience_to_translate_batch():
    """The worker's `_translate_texts` hands `search["patience"]` to `translate_batch`
    (CTranslate2's default 1 without one), with the benchmark's other options."""
    from benchmarks.ctranslate2_process import _translate_texts

    class Recorder:
        def __init__(self):
            self.calls = []

        def translate_batch(self, tokens, **options):
            self.calls.append(options)
            return [type("Result", (), {"hypotheses": [list(t)]}) for t in tokens]

    class Pieces:  # a SentencePiece processor's encode and decode, a character a piece
        def encode(self, texts, out_type):
            return [list(t) for t in texts]

        def decode(self, pieces):
            return ["".join(p) for p in pieces]

    search = dict(beam_size=4, alpha=0.6, max_extra_length=50, limit=255)
    recorder = Recorder()
    assert _translate_texts(recorder, Pieces(), ["ab", "c"], search) == ["ab", "c"]
    _translate_texts(recorder, Pieces(), ["ab"], dict(search, patience=2.5))
    assert [call["patience"] for call in recorder.calls] == [1.0, 2.5]
    assert recorder.calls[0] == dict(beam_size=4, length_penalty=0.6, patience=1.0,
                                     max_batch_size=2, max_decoding_length=2 + 1 + 50)  # fmt: skip


def test_a_peer_patience_below_one_hypothesis_is_refused(capsys):
    from benchmarks import latency_benchmark

    with pytest.raises(SystemExit):
        latency_benchmark.main(["--no-peers", "--peer-patience", "1", "0.1"])
    err = capsys.readouterr().err
    assert "--peer-patience must be at least 0.125" in err
    assert "Received: [1.0, 0.1]" in err


def test_a_ctranslate2_worker_that_cannot_load_says_which_and_why(tmp_path):
    pytest.importorskip("ctranslate2")
    from benchmarks.ctranslate2_process import Worker

    missing = str(tmp_path / "no_model")
    options = dict(beam_size=1, alpha=0.6, max_extra_length=5, limit=63)
    with pytest.raises(RuntimeError, match="int8 worker for .*no_model.* did not start"):
        Worker(missing, str(tmp_path / "no.model"), "int8", options)


def test_benchmarks_and_ctranslate2_workers_set_malloc_as_the_commands_do(monkeypatch):
    """`benchmarks/run.py` sets its process's glibc malloc before a workload starts, and a
    CTranslate2 worker its own before loading CTranslate2 (the same setting on both sides of
    a comparison: 2026-11-29-issue-54-peer-malloc.md); both read KERAS_TRANSFORMER_MALLOC."""
    from benchmarks import catalog
    from benchmarks.ctranslate2_process import _serve

    class Reached(Exception):
        pass

    def reached():
        raise Reached

    monkeypatch.setattr(catalog.malloc, "keep_freed_memory", reached)
    with pytest.raises(Reached):
        catalog.main(["serving", "single", "--help"])
    monkeypatch.undo()
    monkeypatch.setenv("KERAS_TRANSFORMER_MALLOC", "bogus")
    with pytest.raises(ValueError, match="KERAS_TRANSFORMER_MALLOC='bogus'"):
        _serve(None, "no_model", None, "float32", None, 1)  # fails before CTranslate2 loads


def test_savedmodel_workers_translate_as_the_export_in_process_with_their_pools_sized(
    serving_export_dir,
):
    """`serving single --our-threads`: the export in a spawned process per thread count
    (TensorFlow sizes its pools once a process) gives the same translations as the export
    loaded here and times its own requests; three threads start at least two more OS threads
    in each of TensorFlow's intra-op and inter-op pools than one, and this process's
    environment is as before."""
    import os

    import tensorflow as tf

    from benchmarks.latency_benchmark import timed_call
    from benchmarks.savedmodel_process import POOLS, Worker
    from keras_transformer.testing.model_dir import SENTENCES

    texts = list(SENTENCES[:3])
    signature = tf.saved_model.load(serving_export_dir).signatures["serving_default"]
    here = [t.decode() for t in signature(text=tf.constant(texts))["translations"].numpy()]
    before = {name: os.environ.get(name) for name in POOLS}
    workers = {n: Worker(serving_export_dir, n) for n in (1, 3)}
    try:
        assert {name: os.environ.get(name) for name in POOLS} == before
        threads = {}
        for n, worker in workers.items():
            assert worker._process.pid != os.getpid()
            outputs, seconds = timed_call(worker, texts)
            assert outputs == here and 0 < seconds < 60
            assert timed_call(worker, texts[:1])[0] == here[:1]
            if os.path.isdir(f"/proc/{worker._process.pid}/task"):  # Linux: count its threads
                threads[n] = len(os.listdir(f"/proc/{worker._process.pid}/task"))
        if threads:
            assert threads[3] - threads[1] >= 4, threads
    finally:
        for worker in workers.values():
            worker.close()


def test_savedmodel_worker_refuses_threads_below_one_and_says_when_it_cannot_load(tmp_path):
    from benchmarks import latency_benchmark
    from benchmarks.savedmodel_process import Worker

    with pytest.raises(ValueError, match="threads must be at least 1. Received: 0"):
        Worker(str(tmp_path), 0)
    with pytest.raises(RuntimeError, match="SavedModel worker for .*no_export.* did not start"):
        Worker(str(tmp_path / "no_export"), 1)
    with pytest.raises(SystemExit, match="--our-threads must each be at least 1. Received: 0"):
        latency_benchmark.main(["--no-peers", "--our-threads", "1", "0"])  # before any model
