"""The systems that the train, decode and scaling workloads compare (`side_by_side.py`), one
small module each, all with one interface:

    make_train(spec) -> (run(steps), parameters)             # timed: `steps` full steps
    make_decode(spec, model) -> (run() -> lengths, parameters)  # one batch; output lengths

`spec` (`benchmarks.peers.spec.Spec`) fixes the sizes and the random batch; `model` is our
random Keras model, which CTranslate2 converts (the others ignore it or are it). A peer's
libraries are imported only inside its functions, so a missing one costs an `ImportError`
there and nothing else.
"""

from __future__ import annotations

import functools

from benchmarks.peers import ctranslate2_peer, model_garden, ours, pytorch_nmt

TRAIN = {
    ours.NAME: ours.make_train,
    model_garden.NAME: model_garden.make_train,
    pytorch_nmt.NAME: pytorch_nmt.make_train,
    # Training in bfloat16 (pays on CPUs with AVX512_BF16 or AMX, and on GPUs)
    ours.NAME_BFLOAT16: functools.partial(ours.make_train, dtype="mixed_bfloat16"),
    pytorch_nmt.NAME_BFLOAT16: functools.partial(pytorch_nmt.make_train, bfloat16=True),
    model_garden.NAME_BFLOAT16: functools.partial(model_garden.make_train, dtype="mixed_bfloat16"),
}
DECODE = {
    ours.NAME: ours.make_decode,
    ours.NAME_BFLOAT16: ours.make_decode_bfloat16,
    model_garden.NAME: model_garden.make_decode,
    **{
        f"ctranslate2-{kind}": functools.partial(ctranslate2_peer.make_decode, compute_type=kind)
        for kind in ctranslate2_peer.COMPUTE_TYPES
    },
}
