"""Which tests leave the default stage (README's `python -m pytest -q`, at most 6 minutes on a
2-core CPU) for CI's slow stage, in one table that `conftest.py` applies at collection.

The default stage keeps a reference check of every part (layers and model against NumPy and
the uncached model, beam search against exhaustive search, one export and its signatures,
training's step, checkpoints and schedules, the commands' error lines); what is listed here runs
in CI's slow stage (`.ci/run`), with the tests marked `slow` in their files:

- `SLOW`: the default stage's heavier cases (traced exports and their signatures, decoding
  designs against each other, commands run end to end, other backends, peers). CI runs them
  with one xdist worker per core, like the default stage.
- `SERIAL`: tests that start clusters of processes (workers on loopback, eight replicas) or
  time a load: CI runs them one at a time (`-n 0`).

An entry is a file (`tests/test_x.py`), a test (`tests/test_x.py::test_name`, all its
parameters) or one parameter (`tests/test_x.py::test_name[id]`). Chosen by
`python -m pytest -q --durations=0` on a 2-core AVX2 EPYC (2026-11-26): the default stage took
16:40 with everything in it, 4:06 without the entries below; 9:08 on 2026-11-29 before the
last rebalance below.
Rebalance with the same command.
"""

from __future__ import annotations

SLOW = frozenset(
    {
        "tests/test_prepared_data.py::test_shard_batches_are_tf_data_bucketing_and_counted_from_the_histogram[False]",
        # Rebalanced after issues 51-53 (default stage 4:58 with them): checks that another
        # default test already covers (the paper's base count; the growing cache against the
        # uncached decoder; the train script's other error line).
        "tests/test_quick_preset.py::test_quick_preset_parameter_count",
        "tests/test_slot_cache.py::test_step_logits_match_the_uncached_decoder_under_random_reorders",
        "tests/test_preflight.py::test_train_script_prints_one_error_line_with_exit_2[empty_corpus]",
        # Whole files: a module fixture builds an export, a converted or trained model.
        "tests/test_accumulation.py",
        "tests/test_backends.py",
        "tests/test_bench_runner.py",
        "tests/test_client.py",
        "tests/test_ctranslate2.py",
        "tests/test_dev_evaluation.py",
        "tests/test_documents.py",
        "tests/test_padded_kernels.py",
        "tests/test_serving_load.py",
        "tests/test_shrinking.py",
        "tests/test_warm_start.py",
        # Commands run end to end (a new Python and TensorFlow each).
        "tests/test_cli.py::test_help_and_a_short_run_keep_tensorflow_start_up_quiet",
        "tests/test_cli.py::test_missing_model_dir_is_one_error_line",
        "tests/test_cli.py::test_score_command_in_input_order_with_progress",
        "tests/test_cli.py::test_serving_and_cli_import_from_any_directory",
        "tests/test_cli.py::test_translate_file_in_input_order_n_best_tsv_and_progress",
        "tests/test_cli.py::test_translate_is_interactive_when_stdin_is_a_terminal",
        "tests/test_cli.py::test_translate_paragraph_line_is_its_sentences_one_by_one",
        "tests/test_corpora.py::test_mix_training_stream_is_deterministic_and_resumes_by_skipping",
        "tests/test_corpora.py::test_train_cli_refuses_misaligned_files_with_one_error_line",
        "tests/test_evaluate.py",
        "tests/test_nonfinite.py::test_nonfinite_run_exits_3_and_writes_nothing_from_it",
        "tests/test_preflight.py::test_train_script_debug_shows_the_traceback",
        "tests/test_quick_preset.py::test_train_command_stops_at_its_time_limit_and_finishes_the_run",
        # Decoding: the default stage keeps cached == full pass, beam == exhaustive search,
        # the slot cache against the uncached decoder.
        "tests/test_decoding.py::test_empty_and_too_long_sources",
        "tests/test_decoding.py::test_greedy_is_the_argmax_chain_and_beam_one",
        "tests/test_decoding.py::test_greedy_sampling_is_top_k_one_and_beam_one",
        "tests/test_decoding.py::test_keras_file_round_trip_decodes_without_config",
        "tests/test_decoding.py::test_mixed_batch_gives_what_each_source_gives_alone",
        "tests/test_decoding.py::test_n_best_shapes_and_ragged_input",
        "tests/test_decoding.py::test_sample_tensors_checks_values_and_served_tensors",
        "tests/test_decoding.py::test_scores_are_model_log_probs_over_length_penalty",
        "tests/test_decoding.py::test_translator_sample_same_seed_same_output_other_seed_differs",
        "tests/test_decoding.py::test_translator_strings_batches_and_export_signature",
        "tests/test_scoring.py::test_score_of_beam_output_equals_the_beam_score",
        "tests/test_scoring.py::test_score_of_sampled_output_equals_the_sampling_score",
        "tests/test_scoring.py::test_scores_equal_numpy_log_softmax_of_the_models_logits[1.0]",
        "tests/test_slot_cache.py::test_beam_search_equals_the_fixed_shape_design",
        "tests/test_slot_cache.py::test_greedy_sampling_equals_the_fixed_shape_design",
        # The export: the default stage keeps its layout, op set and batched translation.
        "tests/test_export.py::test_bad_inputs_get_one_translation_each",
        "tests/test_export.py::test_long_sentence_comes_back_whole_and_oversized_input_is_refused",
        "tests/test_export.py::test_sample_signature_same_seed_same_output_other_seeds_differ",
        "tests/test_export.py::test_saved_model_cli_reports_signatures",
        "tests/test_export.py::test_verify_command_loads_weights_and_fails_on_mismatches",
        "tests/test_export.py::test_warmup_requests_cover_every_signature_and_replay",
        "tests/test_export_rules.py::test_op_check_rejects_python_and_other_custom_ops",
        # Layers and model: the default stage keeps one layer of each kind and two of the
        # model's eight cached-decoding variants.
        "tests/test_layer_contract.py::test_layer_passes_the_shared_layer_test[decoder_layer]",
        "tests/test_layer_contract.py::test_layer_passes_the_shared_layer_test[decoder_learned_pre]",
        "tests/test_layer_contract.py::test_layer_passes_the_shared_layer_test[decoder_sinusoidal_post]",
        "tests/test_layer_contract.py::test_layer_passes_the_shared_layer_test[encoder_learned_pre]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[learned-fixed]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[learned-growing]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[paper-fixed]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[pre-growing]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[unshared-fixed]",
        "tests/test_model.py::test_cached_decoding_equals_full_pass[unshared-growing]",
        "tests/test_model.py::test_parameter_count_matches_paper[big-213000000.0-0.02]",
        "tests/test_model.py::test_parameter_count_of_variants",
        "tests/test_model.py::test_save_and_load_gives_identical_logits",
        # Training: the default stage keeps one fit step, checkpoints, schedules, batches.
        "tests/test_malloc.py::test_importing_the_library_leaves_glibc_alone",
        "tests/test_nonfinite.py::test_nonfinite_gradient_on_one_replica_is_skipped_on_all",
        "tests/test_training.py::test_loss_gradient_under_the_jax_backend",
        "tests/test_training.py::test_mirrored_strategy_matches_one_device",
        "tests/test_training.py::test_training_flags_run_end_to_end[mixed_bfloat16]",
        # Rebalanced on the AVX2-only EPYC, 2026-11-29 (default stage 9:08 with these): the
        # default keeps the deterministic cases, one of each parametrized exactness check and
        # the growing search's XLA-free path; the XLA and transposed-kernel designs against
        # the plain search, the random markup checks (every seed), other ids and widths and
        # the train script's second error line go here.
        "tests/test_beam_search.py::test_next_step_stop_gives_each_item_its_own_result_whatever_its_batch[padded]",
        "tests/test_decoding.py::test_a_jit_translator_searches_batches_above_xla_max_rows_without_xla",
        "tests/test_decoding.py::test_a_stored_output_kernel_is_the_embeddings_transpose_and_read_by_the_xla_search",
        "tests/test_edges.py::test_random_alignments_keep_edge_punctuation_outside",
        # 2026-11-29, night (default stage 5:51 and 6:06 on a slower day of the same machine):
        # tracing the markup ops twice; test_edge_case's table keeps insert_tags in the default.
        "tests/test_edges.py::test_inputs_without_tags_and_with_tags_in_one_batch",
        "tests/test_hidden_elements.py::test_random_pages_hide_what_html_parser_hides",
        "tests/test_input_checks.py::test_source_ids_outside_the_vocabulary_are_refused_naming_the_id[-1]",
        "tests/test_input_checks.py::test_source_ids_outside_the_vocabulary_are_refused_naming_the_id[-4000]",
        "tests/test_prepared_data.py::test_shard_batches_are_tf_data_bucketing_and_counted_from_the_histogram[True]",
        "tests/test_transposed_kernels.py",
        "tests/test_warmup.py::test_width_requests_reach_every_bucket_of_a_one_sentence_request",
        "tests/test_preflight.py::test_train_script_prints_one_error_line_with_exit_2[unwritable_model_dir]",
        # Out of SERIAL on the AVX2-only EPYC, 2026-11-29 (CI ran past 90 minutes there): runs
        # of one process each that a test kills, signals or resumes, beside their reference run
        # (`testing.runs.Background`); their deadlines (a checkpoint within minutes, an exit
        # within a 20 s grace) hold with another test beside them. Most of a tiny run is one
        # thread's start-up and tracing, so the serial stage left a core idle.
        "tests/test_data_service.py",  # a tf.data service in process, training runs reading it
        "tests/test_exact_resume.py",
        "tests/test_prepared_data.py::test_kill9_and_rerun_on_prepared_shards_equals_uninterrupted_run",
        "tests/test_prepared_data.py::test_sigterm_and_rerun_on_prepared_shards_equals_uninterrupted_run",
        "tests/test_loss_scaling.py::test_an_overflow_on_replica_1_only_is_skipped_on_both_replicas",
        "tests/test_nonfinite.py::test_nonfinite_run_resumes_from_last_finite_checkpoint",
        "tests/test_preemption.py::test_sigterm_and_rerun_equals_uninterrupted_run",
        "tests/test_training.py::test_killed_run_resumes_from_checkpoint",
        # The benchmarks' worker processes (a SavedModel or CTranslate2 each, spawned).
        "tests/test_latency_benchmark.py::test_ctranslate2_workers_translate_as_ctranslate2_in_process_and_time_themselves",
        "tests/test_latency_benchmark.py::test_savedmodel_worker_refuses_threads_below_one_and_says_when_it_cannot_load",
        "tests/test_latency_benchmark.py::test_savedmodel_workers_translate_as_the_export_in_process_with_their_pools_sized",
    }
)

SERIAL = frozenset(
    {
        # Clusters of processes on loopback, with deadlines on how fast the others react.
        "tests/test_prepared_workers.py",  # two-worker clusters on loopback (FILE sharding)
        "tests/test_loss_scaling.py::test_two_workers_skip_an_overflow_on_one_worker_together_and_neither_hangs",
        "tests/test_multi_worker.py",
        "tests/test_replicas.py",  # eight CPU replicas in one process
        "tests/test_serving_load.py::test_thirty_two_clients_for_a_minute",  # a minute's load
    }
)


def stage_of(nodeid: str) -> str | None:
    """The stage of a test's node id: "serial", "slow" or None (the default stage), from its most
    specific entry in `SERIAL` or `SLOW` (one parameter, then the test, then its file)."""
    test = nodeid.split("[", 1)[0]
    for key in (nodeid, test, test.split("::", 1)[0]):
        if key in SERIAL:
            return "serial"
        if key in SLOW:
            return "slow"
    return None
