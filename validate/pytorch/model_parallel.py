"""Model-parallel modes of the PyTorch trainer (validate/pytorch/train.py --parallel tp|pp) for a GPT-2-style
model (train.py's Gpt) on 2 processes over gloo:

- tp: 2-way Megatron-style tensor parallelism (Shoeybi et al. 2019, section 3): in every block the fused QKV
  projection and fc1 are split by output columns (each rank holds half the heads and half the MLP), the
  attention output projection and fc2 by input rows; an autograd function allreduces their partial outputs
  in forward (identity backward) and another allreduces the input gradient entering each split region in
  backward (identity forward). Embedding, layer norms and the LM head are replicated; both ranks see the
  same batch. Two allreduces of batch x seq x hidden floats per block in forward, two in backward.
- pp: a 2-stage pipeline (rank 0: embedding and the first half of the blocks; rank 1: the rest, the final
  norm, the LM head and the loss) over `--micro-batches` micro-batches of `--batch` sequences with the
  1F1B schedule (Narayanan et al. SC'21): stage 0 runs one forward ahead, then alternates forward i+1 and
  backward i; activations and their gradients cross with torch.distributed send/recv.

Each rank builds the whole model from the same seed and keeps its part, so the split model equals the
1-process one: check_split() compares their first losses. Reports use dtsim-train's schema (forward =
compute of the forward passes, backward = of the backward passes, exchange = the rest of the step before the
optimizer: the tensor-parallel allreduces, timed around each call, or the pipeline's transfers, bubble and
tied-embedding allreduce; update = optimizer step), plus per iteration the allreduce calls and bytes (tp) or
the bytes sent and allreduced (pp) of rank 0."""
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

TP_RANKS = 2
PP_STAGES = 2


class _Collectives:
    """The tensor-parallel allreduces of one step on this rank: seconds spent in each pass, calls and bytes.
    They block (gloo on CPU), and autograd runs the backward ones on the calling thread, so timing the call
    gives their share of forward and backward."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.seconds = {"forward": 0.0, "backward": 0.0}
        self.calls = 0
        self.bytes = 0

    def all_reduce(self, x, pass_name):
        a = time.perf_counter()
        dist.all_reduce(x)
        self.seconds[pass_name] += time.perf_counter() - a
        self.calls += 1
        self.bytes += x.numel() * x.element_size()


_TP_COLLECTIVES = _Collectives()


class _AllreduceForward(torch.autograd.Function):
    """Megatron's g: sum the partial outputs of a row-split layer; the gradient passes through."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        _TP_COLLECTIVES.all_reduce(x, "forward")
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class _AllreduceBackward(torch.autograd.Function):
    """Megatron's f: identity forward; the input gradient of a column-split region is summed over ranks."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        _TP_COLLECTIVES.all_reduce(g, "backward")
        return g


def _columns(linear, index, parts, groups=1):
    """The output columns of `linear` this rank keeps: the index-th of `parts` slices within each of
    `groups` equal groups (the fused QKV weight is [q; k; v]: each rank keeps its heads of all three)."""
    out = linear.out_features // groups
    keep = out // parts
    rows = torch.cat([torch.arange(g * out + index * keep, g * out + (index + 1) * keep) for g in range(groups)])
    split = nn.Linear(linear.in_features, len(rows), bias=linear.bias is not None)
    with torch.no_grad():
        split.weight.copy_(linear.weight[rows])
        if linear.bias is not None:
            split.bias.copy_(linear.bias[rows])
    return split


def _rows(linear, index, parts):
    """The input rows of `linear` this rank keeps; the bias is added once (on rank 0) before the allreduce."""
    keep = linear.in_features // parts
    split = nn.Linear(keep, linear.out_features, bias=linear.bias is not None and index == 0)
    with torch.no_grad():
        split.weight.copy_(linear.weight[:, index * keep:(index + 1) * keep])
        if split.bias is not None:
            split.bias.copy_(linear.bias)
    return split


class _TpAttention(nn.Module):
    def __init__(self, attn, rank):
        super().__init__()
        self.qkv = _columns(attn.qkv, rank, TP_RANKS, groups=3)
        self.core = attn.core
        self.core.heads = attn.core.heads // TP_RANKS
        self.proj = _rows(attn.proj, rank, TP_RANKS)

    def forward(self, x):
        return _AllreduceForward.apply(self.proj(self.core(self.qkv(_AllreduceBackward.apply(x)))))


class _TpMlp(nn.Module):
    def __init__(self, mlp, rank):
        super().__init__()
        self.fc1 = _columns(mlp.fc1, rank, TP_RANKS)
        self.gelu = mlp.gelu
        self.fc2 = _rows(mlp.fc2, rank, TP_RANKS)

    def forward(self, x):
        return _AllreduceForward.apply(self.fc2(self.gelu(self.fc1(_AllreduceBackward.apply(x)))))


def split_tensor_parallel(model, rank):
    """`model` (a Gpt) with each block's attention and MLP replaced by this rank's tensor-parallel half."""
    if model.layers[0].attn.core.heads % TP_RANKS:
        raise SystemExit(f"train.py: --parallel tp: n_head must be a multiple of {TP_RANKS}")
    for block in model.layers:
        block.attn = _TpAttention(block.attn, rank)
        block.mlp = _TpMlp(block.mlp, rank)
    return model


class _Stage(nn.Module):
    """One pipeline stage of a Gpt: the first takes token ids, the last returns the logits."""

    def __init__(self, model, stage):
        super().__init__()
        half = (len(model.layers) + 1) // 2
        self.first, self.last = stage == 0, stage == PP_STAGES - 1
        self.embed = model.embed if self.first else None
        self.embed_drop = model.embed_drop if self.first else None
        self.layers = nn.ModuleList(model.layers[:half] if self.first else model.layers[half:])
        self.final_norm = model.final_norm if self.last else None
        # The tied LM head's weight lives on the last stage as its own copy (gradients summed each step).
        self.head = nn.Parameter(model.embed.wte.weight.detach().clone()) if self.last else None

    def forward(self, x):
        if self.first:
            x = self.embed_drop(self.embed(x))
        for block in self.layers:
            x = block(x)
        return F.linear(self.final_norm(x), self.head) if self.last else x


def _phases(t0, compute_fwd, compute_bwd, t_opt0, t_end, sent_bytes, tied_bytes):
    return {"forward_s": compute_fwd, "backward_s": compute_bwd,
            "exchange_s": max(0.0, (t_opt0 - t0) - compute_fwd - compute_bwd), "update_s": t_end - t_opt0,
            "sent_bytes": sent_bytes, "allreduce_bytes": tied_bytes}


def train_tensor_parallel(model, optimizer_of, batches, loss_of, rank):
    """Trains split_tensor_parallel(model) on `batches` [(x, y)] (the same on both ranks); yields per-step
    (phases, loss)."""
    model = split_tensor_parallel(model, rank)
    optimizer = optimizer_of(model)
    comm = _TP_COLLECTIVES
    for x, y in batches:
        comm.reset()
        t0 = time.perf_counter()
        loss = loss_of(model, x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t3 = time.perf_counter()
        # The allreduces block inside forward and backward: their time is the exchange, the rest compute.
        fwd_comm, bwd_comm = comm.seconds["forward"], comm.seconds["backward"]
        yield {"forward_s": t1 - t0 - fwd_comm, "backward_s": t2 - t1 - bwd_comm, "exchange_s": fwd_comm + bwd_comm,
               "update_s": t3 - t2, "allreduce_calls": comm.calls, "allreduce_bytes": comm.bytes}, loss.item()


def train_pipeline(model, optimizer_of, batches, micro_batches, rank):
    """Trains this rank's stage of `model` with 1F1B over `micro_batches` micro-batches of each (x, y) of
    `batches`; yields per-step (phases, mean loss on the last stage, 0 on the first)."""
    stage = _Stage(model, rank)
    optimizer = optimizer_of(stage)
    peer = 1 - rank
    for x, y in batches:
        xs, ys = x.chunk(micro_batches), y.chunk(micro_batches)
        t0 = time.perf_counter()
        fwd_s = bwd_s = 0.0
        outs, ins, pending, total = {}, {}, [], 0.0
        sent = [0]  # bytes this rank sends (activations from the first stage, their gradients from the last)

        def send(t):
            sent[0] += t.numel() * t.element_size()
            pending.append(dist.isend(t, peer))

        def forward(i):
            nonlocal fwd_s
            if stage.first:
                a = time.perf_counter()
                outs[i] = stage(xs[i])
                fwd_s += time.perf_counter() - a
                send(outs[i].detach().contiguous())
            else:
                h = torch.empty(xs[i].shape[0], xs[i].shape[1], model.final_norm.normalized_shape[0])
                dist.recv(h, peer)
                ins[i] = h.requires_grad_(True)
                a = time.perf_counter()
                logits = stage(ins[i])
                outs[i] = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys[i].reshape(-1)) / micro_batches
                fwd_s += time.perf_counter() - a

        def backward(i):
            nonlocal bwd_s, total
            if stage.first:
                g = torch.empty_like(outs[i])
                dist.recv(g, peer)
                a = time.perf_counter()
                outs[i].backward(g)
                bwd_s += time.perf_counter() - a
            else:
                a = time.perf_counter()
                outs[i].backward()
                bwd_s += time.perf_counter() - a
                total += outs[i].item()
                send(ins[i].grad.contiguous())
            del outs[i]

        if stage.first:  # 1F1B on 2 stages: one forward ahead, then forward i+1 / backward i
            forward(0)
            for i in range(1, micro_batches):
                forward(i)
                backward(i - 1)
            backward(micro_batches - 1)
        else:
            for i in range(micro_batches):
                forward(i)
                backward(i)
        for w in pending:
            w.wait()
        # The tied embedding: the first stage's table and the last stage's head copy get the sum of both
        # gradients, as Megatron-LM's embedding group allreduce does, so the two copies stay equal.
        tied = stage.embed.wte.weight.grad if stage.first else stage.head.grad
        dist.all_reduce(tied)
        t1 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t2 = time.perf_counter()
        yield _phases(t0, fwd_s, bwd_s, t1, t2, sent[0], tied.numel() * tied.element_size()), total
