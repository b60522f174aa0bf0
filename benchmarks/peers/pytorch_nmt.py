"""PyTorch: `torch.nn.Transformer` of our sizes trained with `torch.optim.Adam` (train only).

The model mirrors ours (`keras_transformer.model`): batch-first, ReLU, LayerNorm epsilon and
norm position of our config, a final LayerNorm after each stack only for pre-norm (ours has
none after post-norm layers), one embedding matrix for source, target and the pre-softmax
projection (no output bias), embeddings scaled by sqrt(d_model), the paper's sinusoidal
encodings, no dropout. Loss: label-smoothed cross-entropy over non-PAD labels (PyTorch's
smoothing is ours: (1 - eps) one-hot + eps / vocab); Adam(0.9, 0.98, 1e-9) with the paper's
schedule through `LambdaLR`.
"""

from __future__ import annotations

import math
import os

from benchmarks.peers.spec import Spec, train_batch

NAME = "pytorch"
NAME_BFLOAT16 = "pytorch-bfloat16"


def sinusoid(length: int, d_model: int):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...): (length, d_model)."""
    import torch

    position = torch.arange(length, dtype=torch.float32)[:, None]  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,)
    angles = position / torch.pow(10000.0, two_i / d_model)  # (length, d_model / 2)
    table = torch.zeros(length, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return table


def build(config):
    """A `torch.nn.Module`: (source, target) int64 (batch, len) -> logits (batch, len, vocab)."""
    import torch
    from torch import nn

    class TorchTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            d, pre = config.d_model, config.norm_position == "pre"
            layer = dict(d_model=d, nhead=config.num_heads, dim_feedforward=config.d_ff,
                         dropout=0.0, activation="relu", layer_norm_eps=config.layer_norm_epsilon,
                         batch_first=True, norm_first=pre)  # fmt: skip

            def final_norm():  # after the last layer: pre-norm only, as ours
                return nn.LayerNorm(d, eps=config.layer_norm_epsilon) if pre else None

            encoder = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(**layer), config.num_layers, norm=final_norm(),
                enable_nested_tensor=False,
            )  # fmt: skip
            decoder = nn.TransformerDecoder(
                nn.TransformerDecoderLayer(**layer), config.num_layers, norm=final_norm()
            )
            self.transformer = nn.Transformer(  # Glorot-uniform init of every matrix, as ours
                d_model=d, nhead=config.num_heads, custom_encoder=encoder,
                custom_decoder=decoder, batch_first=True,
            )  # fmt: skip
            self.embedding = nn.Embedding(config.vocab_size, d)
            nn.init.normal_(self.embedding.weight, std=d**-0.5)
            self.register_buffer("encoding", sinusoid(config.max_length, d), persistent=False)
            self.scale, self.pad_id = math.sqrt(d), config.pad_id

        def embed(self, ids):  # (batch, len) -> (batch, len, d_model)
            return self.embedding(ids) * self.scale + self.encoding[: ids.shape[1]]

        def forward(self, source, target):
            length = target.shape[1]
            causal = torch.triu(  # True: masked
                torch.ones(length, length, dtype=torch.bool, device=target.device), 1
            )
            source_pad = source == self.pad_id  # (batch, src_len)
            hidden = self.transformer(
                self.embed(source), self.embed(target), tgt_mask=causal, tgt_is_causal=True,
                src_key_padding_mask=source_pad, memory_key_padding_mask=source_pad,
                tgt_key_padding_mask=target == self.pad_id,
            )  # fmt: skip  # -> (batch, tgt_len, d_model)
            return hidden @ self.embedding.weight.T  # -> (batch, tgt_len, vocab)

    return TorchTransformer()


def count_params(config) -> int:
    return sum(p.numel() for p in build(config).parameters())


def make_train(spec: Spec, bfloat16: bool = False, device: str = "cpu"):
    """`(run(steps), parameters)`: forward, loss, backward, Adam step and schedule step;
    `bfloat16`: forward and loss under `torch.autocast(device type, torch.bfloat16)` (float32
    weights and optimizer, like Keras' "mixed_bfloat16"). `device`: a torch device ("cpu",
    "cuda"); `run` returns once the device has finished its steps."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    config = spec.model_config()
    model = build(config).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup, d_model = spec.warmup_steps, config.d_model

    def rate(iteration: int) -> float:  # LambdaLR's 0-based count; the paper's step is +1
        step = iteration + 1
        return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    batch = {k: torch.from_numpy(v).long().to(device) for k, v in train_batch(spec).items()}
    device_type = torch.device(device).type

    def run(steps: int) -> None:
        for _ in range(steps):
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bfloat16):
                logits = model(batch["source"], batch["target"])  # (batch, len, vocab)
                loss = F.cross_entropy(
                    logits.reshape(-1, config.vocab_size).float(), batch["labels"].reshape(-1),
                    ignore_index=config.pad_id, label_smoothing=config.label_smoothing,
                )  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
        if device_type == "cuda":  # CUDA runs asynchronously: wait for the last step
            torch.cuda.synchronize()

    return run, sum(p.numel() for p in model.parameters())
