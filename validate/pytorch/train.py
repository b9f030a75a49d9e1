#!/usr/bin/python3
"""Real PyTorch training for `dtsim validate --framework pytorch`: torchvision's ResNet-18, a LeNet-5, or a
GPT-2-style language model from a Hugging Face config.json (model_type gpt2), eager mode, SGD with momentum, 1 process or N processes with DistributedDataParallel over gloo. Writes
one JSON report in dtsim-train's schema (per-iteration phases, own CPU time and machine busy time for
the disturbance check of validate/src/measure.cpp). Also --bench-comm (gloo allreduce / send-recv
curves) and --check-model (the torch model against dtsim's layer table).

The data are loaded and the untrained model is evaluated in the launching process; training runs in
processes started afresh (also for 1 process) that receive the data through shared memory and copy it,
so their heap starts as a plain training script's: whatever glibc's dynamic mmap threshold becomes, the
training step's own blocks set it, not the loading's temporaries (the allocator regime of
calibrate/allocator.hpp; the environment -- MALLOC_* or LD_PRELOAD -- picks the regime).

Run with /usr/bin/python3 (Debian's python3-torch and python3-torchvision)."""
import argparse
import gzip
import json
import os
import resource
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian package dataset-fashion-mnist
CLASSES = 10
SGD_LEARNING_RATE = 0.01
SGD_MOMENTUM = 0.9
DDP_BUCKET_CAP_MB = 25  # DistributedDataParallel's default bucket_cap_mb
BENCH_SIZES_B = [4 << k for k in range(0, 25, 2)]  # 4 B .. 64 MiB
BENCH_REPEATS = 5


class LeNet5(nn.Module):
    """dtsim's lenet5 (models/src/zoo.cpp): the layer names are dtsim's."""

    def __init__(self, channels, side, classes):
        super().__init__()
        pad = max(0, (32 - side + 1) // 2)
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=pad)
        self.tanh1 = nn.Tanh()
        self.pool1 = nn.AvgPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.tanh2 = nn.Tanh()
        self.pool2 = nn.AvgPool2d(2, 2)
        self.conv3 = nn.Conv2d(16, 120, 5)
        self.tanh3 = nn.Tanh()
        self.fc1 = nn.Linear(120, 84)
        self.tanh4 = nn.Tanh()
        self.fc2 = nn.Linear(84, classes)

    def forward(self, x):
        x = self.pool1(self.tanh1(self.conv1(x)))
        x = self.pool2(self.tanh2(self.conv2(x)))
        x = torch.flatten(self.tanh3(self.conv3(x)), 1)
        return self.fc2(self.tanh4(self.fc1(x)))


class GptEmbedding(nn.Module):
    """Token and learned position embeddings, summed (dtsim's `embedding` row)."""

    def __init__(self, vocab, positions, hidden):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)

    def forward(self, ids):
        return self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))


class GptAttentionCore(nn.Module):
    """softmax(Q K^T / sqrt(d) + causal mask) V of a fused QKV tensor, as Hugging Face's GPT2Attention
    computes it in PyTorch 1.13 (matmul, where(mask), softmax, dropout, matmul; no fused kernel)."""

    def __init__(self, heads, positions, dropout):
        super().__init__()
        self.heads = heads
        self.drop = nn.Dropout(dropout)
        # A plain attribute, not a buffer: DDP broadcasts buffers, and gloo has no bool broadcast.
        self.causal = torch.tril(torch.ones(positions, positions, dtype=torch.bool))

    def forward(self, qkv):
        b, s, c = qkv.shape
        h = c // 3
        d = h // self.heads
        q, k, v = (t.view(b, s, self.heads, d).permute(0, 2, 1, 3) for t in qkv.split(h, dim=2))
        w = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5)
        w = torch.where(self.causal[:s, :s], w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = self.drop(torch.softmax(w, dim=-1))
        return torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, s, h)


class GptAttention(nn.Module):
    def __init__(self, hidden, heads, positions, dropout):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.core = GptAttentionCore(heads, positions, dropout)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.proj(self.core(self.qkv(x)))


class GptMlp(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's gelu_new
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(self.gelu(self.fc1(x)))


class Add(nn.Module):
    """A residual add as a module, so dtsim's `addN` layers have a torch module of the same name."""

    def forward(self, a, b):
        return a + b


class GptBlock(nn.Module):
    """Pre-LN block: x + attn(norm1(x)), then + mlp(norm2(.)) (dtsim's pre_ln_block, models/src/transformer.cpp)."""

    def __init__(self, c, eps):
        super().__init__()
        hidden = c["n_embd"]
        self.norm1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = GptAttention(hidden, c["n_head"], c["n_positions"], c.get("attn_pdrop", 0.1))
        self.attn_drop = nn.Dropout(c.get("resid_pdrop", 0.1))
        self.add1 = Add()
        self.norm2 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = GptMlp(hidden, c.get("n_inner") or 4 * hidden)
        self.mlp_drop = nn.Dropout(c.get("resid_pdrop", 0.1))
        self.add2 = Add()

    def forward(self, x):
        x = self.add1(x, self.attn_drop(self.attn(self.norm1(x))))
        return self.add2(x, self.mlp_drop(self.mlp(self.norm2(x))))


class Gpt(nn.Module):
    """GPT-2 (Hugging Face GPT2LMHeadModel's computation) with dtsim's layer names: embed, layers.N.{norm1,
    attn.qkv, attn.core, attn.proj, add1, norm2, mlp.fc1, mlp.gelu, mlp.fc2, add2}, final_norm, lm_head
    (tied to the token embedding). Returns the logits."""

    def __init__(self, c):
        super().__init__()
        if c.get("model_type") != "gpt2":
            raise SystemExit(f"train.py: --model: a config.json of model_type gpt2, got '{c.get('model_type')}'")
        if c.get("tie_word_embeddings", True) is not True:
            raise SystemExit("train.py: --model: the GPT trainer ties the LM head to the embedding")
        hidden, eps = c["n_embd"], c.get("layer_norm_epsilon", 1e-5)
        self.vocab = c["vocab_size"]
        self.positions = c["n_positions"]
        self.embed = GptEmbedding(self.vocab, self.positions, hidden)
        self.embed_drop = nn.Dropout(c.get("embd_pdrop", 0.1))
        self.layers = nn.ModuleList([GptBlock(c, eps) for _ in range(c["n_layer"])])
        self.final_norm = nn.LayerNorm(hidden, eps=eps)
        # GPT2PreTrainedModel._init_weights: N(0, 0.02) weights, zero biases, and the residual projections
        # (attn.proj, mlp.fc2) at 0.02 / sqrt(2 layers). PyTorch's default N(0, 1) embedding would give a
        # loss near 80 whose gradients are denormal floats: each matmul then runs ~100x slower on a CPU.
        std = c.get("initializer_range", 0.02)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" not in name:
                scaled = name.endswith("attn.proj.weight") or name.endswith("mlp.fc2.weight")
                nn.init.normal_(p, 0.0, std / (2 * c["n_layer"]) ** 0.5 if scaled else std)

    def forward(self, ids):
        x = self.embed_drop(self.embed(ids))
        for block in self.layers:
            x = block(x)
        return F.linear(self.final_norm(x), self.embed.wte.weight)  # lm_head


def is_language_model(name):
    return name.endswith(".json")


def build_model(name, channels, side):
    if is_language_model(name):
        with open(name) as f:
            return Gpt(json.load(f))
    if name == "lenet5":
        return LeNet5(channels, side, CLASSES)
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=CLASSES)
        if channels != 3:  # the usual adaptation to gray images: the first convolution takes 1 channel
            m.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return m
    raise SystemExit(f"train.py: --model: expected lenet5, resnet18 or a GPT-2 config.json, got '{name}'")


def torch_name(dtsim_name):
    """torchvision's module name for a dtsim layer name (dtsim names its shortcut conv/bn, torchvision numbers them)."""
    return dtsim_name.replace(".downsample.conv", ".downsample.0").replace(".downsample.bn", ".downsample.1")


def check_model(model, layers_path, channels, side, seq_len=0):
    """Every dtsim layer with parameters has a torch module of the same name, parameter count and output
    shape; the totals agree. Returns a list of mismatches (empty when equal). A language model is checked
    on 2 x seq_len token ids; dtsim's sequence tensors [batch, hidden, seq, 1] are torch's [batch, seq, hidden]."""
    with open(layers_path) as f:
        layers = json.load(f)["layers"]
    modules = dict(model.named_modules())
    shapes = {}
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: shapes.__setitem__(n, list(o.shape)))
             for n, m in modules.items() if n]
    language = isinstance(model, Gpt)
    model.eval()
    with torch.no_grad():
        model(torch.zeros(2, seq_len, dtype=torch.long) if language else torch.zeros(2, channels, side, side))
    model.train()
    for h in hooks:
        h.remove()
    problems = []
    total = 0
    for layer in layers:
        total += layer["params"]
        if layer["params"] == 0:
            continue
        name = torch_name(layer["name"])
        if name not in modules:
            problems.append(f"layer {layer['name']}: no torch module '{name}'")
            continue
        count = sum(p.numel() for p in modules[name].parameters())
        if count != layer["params"]:
            problems.append(f"layer {layer['name']}: {count} parameters in torch, {layer['params']} in dtsim")
        want = [2, layer["dst"][2], layer["dst"][1]] if language else [2] + layer["dst"][1:]
        got = shapes.get(name)
        if got is not None and len(got) == 2:
            got = got + [1, 1]
        if got != want:
            problems.append(f"layer {layer['name']}: output {got} in torch, {want} in dtsim (batch 2)")
    torch_total = sum(p.numel() for p in model.parameters())
    if torch_total != total:
        problems.append(f"model: {torch_total} parameters in torch, {total} in dtsim")
    return problems


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_data(kind, split, channels, side, count, seed):
    """Images (count x channels x side x side, float) and labels: Fashion-MNIST (gray replicated to the
    channels, resized when side != 28) or a fixed synthetic set."""
    if kind == "synthetic":
        g = torch.Generator().manual_seed(seed)
        return torch.rand(count, channels, side, side, generator=g) * 2 - 1, torch.randint(0, CLASSES, (count,), generator=g)
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(FASHION_MNIST_DIR, f"{prefix}-images-idx3-ubyte.gz"))[:count]
    labels = read_idx(os.path.join(FASHION_MNIST_DIR, f"{prefix}-labels-idx1-ubyte.gz"))[:count]
    x = torch.from_numpy(images.copy()).float().div_(255.0).sub_(0.5).div_(0.5).unsqueeze(1)
    if side != 28:
        x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
    return x.expand(-1, channels, -1, -1).contiguous(), torch.from_numpy(labels.astype("int64"))


def load_tokens(count, seq_len, vocab, seed):
    """`count` synthetic sequences of seq_len + 1 tokens, each following t' = (5 t + 7) mod vocab from a
    random start: a rule a small model learns, so the loss falls. Inputs are the first seq_len tokens,
    labels the next ones."""
    g = torch.Generator().manual_seed(seed)
    t = torch.empty(count, seq_len + 1, dtype=torch.long)
    t[:, 0] = torch.randint(0, vocab, (count,), generator=g)
    for i in range(seq_len):
        t[:, i + 1] = (5 * t[:, i] + 7) % vocab
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


def loss_of(model, x, y):
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def own_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def minor_faults():
    """Page faults served without I/O so far (first touches of fresh memory): 0 per iteration in a held heap;
    in glibc's default regime, the pages of the blocks above its dynamic mmap threshold (calibrate/allocator.hpp)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def machine_busy_s():
    """Busy time of every CPU (user nice system irq softirq steal) from /proc/stat, as common/clean_timer."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def reduce(value, op):
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return t.item()


def evaluate(model, x, y, batch):
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(x) - batch + 1, batch):
            correct += (model(x[first:first + batch]).argmax(-1) == y[first:first + batch]).sum().item()
    model.train()
    seen = (len(x) // batch) * batch * (y.shape[1] if y.dim() > 1 else 1)
    return correct / seen if seen else 0.0


def train_model_parallel(a, rank, world):
    """--parallel tp|pp: a GPT split over 2 processes (validate/pytorch/model_parallel.py)."""
    import model_parallel as mp
    torch.manual_seed(a.seed)
    model = build_model(a.model, a.channels, a.side)
    sequences = a.batch * (a.micro_batches if a.parallel == "pp" else 1)
    steps = a.warmup + a.iterations
    xs, ys = load_tokens(steps * sequences, a.seq_len, model.vocab, a.seed)
    batches = [(xs[i * sequences:(i + 1) * sequences], ys[i * sequences:(i + 1) * sequences]) for i in range(steps)]
    with torch.no_grad():  # the unsplit model's first loss, which the split one must reproduce
        unsplit_loss = loss_of(model, *batches[0]).item()
    report = {"model": a.model, "framework": f"pytorch {torch.__version__}", "ranks": world, "batch": sequences,
              "micro_batch": a.batch, "micro_batches": a.micro_batches if a.parallel == "pp" else 1,
              "threads": a.threads, "seq_len": a.seq_len, "strategy": f"{a.parallel}-gloo", "data": a.data,
              "params": sum(p.numel() for p in model.parameters()), "warmup": a.warmup, "online_cpus": os.cpu_count()}

    def optimizer_of(m):
        return torch.optim.SGD(m.parameters(), lr=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)

    steps_iter = (mp.train_tensor_parallel(model, optimizer_of, batches, loss_of, rank) if a.parallel == "tp"
                  else mp.train_pipeline(model, optimizer_of, batches, a.micro_batches, rank))
    iters, losses = [], []
    for it in range(steps):
        cpu0 = own_cpu_s()
        busy0 = machine_busy_s() if rank == 0 else 0.0
        t0 = time.perf_counter()
        phases, loss = next(steps_iter)
        t1 = time.perf_counter()
        busy1 = machine_busy_s() if rank == 0 else 0.0
        own = reduce(own_cpu_s() - cpu0, dist.ReduceOp.SUM)
        total = reduce(t1 - t0, dist.ReduceOp.MAX)
        # tp: both ranks hold the loss; pp: only the last stage (the first reports 0).
        loss = reduce(loss, dist.ReduceOp.MAX if a.parallel == "tp" else dist.ReduceOp.SUM)
        if rank == 0:
            losses.append(loss)
            iters.append({"warmup": it < a.warmup, "total_s": total, "data_s": 0.0, **phases, "own_cpu_s": own,
                          "machine_busy_s": busy1 - busy0, "loss": loss})
    if rank == 0:
        report["iterations"] = iters
        report["losses"] = losses
        report["unsplit_first_loss"] = unsplit_loss
        report["test_accuracy_before"] = report["test_accuracy_after"] = 0.0
        report["layers"] = []
    return report


def initial_model(a):
    torch.manual_seed(a.seed)
    return build_model(a.model, a.channels, a.side)


def load_run_data(a, model):
    """The run's training and test sets (every process's training samples), loaded in the launching process."""
    steps = a.warmup + a.iterations
    if is_language_model(a.model):
        if a.data != "synthetic":
            raise SystemExit("train.py: --data: a language model trains on synthetic token sequences (--data synthetic)")
        train_x, train_y = load_tokens(steps * a.batch * a.procs, a.seq_len, model.vocab, a.seed)
        test_x, test_y = load_tokens(a.test_samples, a.seq_len, model.vocab, a.seed + 1)
    else:
        train_x, train_y = load_data(a.data, "train", a.channels, a.side, steps * a.batch * a.procs, a.seed)
        test_x, test_y = load_data(a.data, "test", a.channels, a.side, a.test_samples, a.seed + 1)
    return train_x, train_y, test_x, test_y


def train(a, rank, world, data, accuracy_before):
    if a.parallel != "dp":
        return train_model_parallel(a, rank, world)
    # Own copies of the shared data: first touches of shared pages would page-fault inside the steps. The
    # copies live until exit, so their blocks never move glibc's threshold.
    train_x, train_y, test_x, test_y = (t.clone() for t in data)
    del data
    model = initial_model(a)
    steps = a.warmup + a.iterations
    report = {"model": a.model, "framework": f"pytorch {torch.__version__}", "ranks": world, "batch": a.batch,
              "threads": a.threads, "seq_len": a.seq_len if is_language_model(a.model) else 0, "strategy": "ddp-gloo" if world > 1 else "single", "data": a.data,
              "params": sum(p.numel() for p in model.parameters()), "warmup": a.warmup,
              "online_cpus": os.cpu_count()}
    report["test_accuracy_before"] = accuracy_before
    hook_calls = []  # perf_counter() at each bucket's allreduce launch, this iteration
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_cap_mb)

        def allreduce_hook(state, bucket):
            hook_calls.append(time.perf_counter())
            buf = bucket.buffer().div_(world)  # DDP's default hook averages, then allreduces
            return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

        model.register_comm_hook(None, allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
    iters, losses = [], []
    for it in range(steps):
        hook_calls.clear()
        cpu0 = own_cpu_s()
        faults0 = minor_faults()
        busy0 = machine_busy_s() if rank == 0 else 0.0
        t0 = time.perf_counter()
        first = (it * world + rank) * a.batch
        x, y = train_x[first:first + a.batch], train_y[first:first + a.batch]
        t1 = time.perf_counter()
        loss = loss_of(model, x, y)
        t2 = time.perf_counter()
        loss.backward()  # with DDP: returns once every bucket's allreduce has finished
        t3 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        t4 = time.perf_counter()
        # Backward compute ends when the last bucket is handed to gloo; the rest is exposed exchange.
        compute_end = max(hook_calls) if hook_calls else t3
        busy1 = machine_busy_s() if rank == 0 else 0.0
        own = reduce(own_cpu_s() - cpu0, dist.ReduceOp.SUM if world > 1 else None)
        faults = reduce(minor_faults() - faults0, dist.ReduceOp.SUM if world > 1 else None)
        total = reduce(t4 - t0, dist.ReduceOp.MAX if world > 1 else None)
        loss_mean = reduce(loss.item(), dist.ReduceOp.SUM if world > 1 else None) / world
        if rank == 0:
            losses.append(loss_mean)
            iters.append({"warmup": it < a.warmup, "total_s": total, "data_s": t1 - t0, "forward_s": t2 - t1,
                          "backward_s": compute_end - t2, "exchange_s": t3 - compute_end, "update_s": t4 - t3,
                          "own_cpu_s": own, "machine_busy_s": busy1 - busy0, "minor_faults": faults,
                          "loss": loss_mean})
    if rank == 0:
        inner = model.module if world > 1 else model
        report["iterations"] = iters
        report["losses"] = losses
        report["test_accuracy_after"] = evaluate(inner, test_x, test_y, a.batch)
        report["layers"] = []
    return report


def bench_comm(rank, world):
    """gloo send/recv ping-pong and allreduce times per message size, as dtsim-train --bench-comm. Each
    allreduce point also gives `cpu_s`, the median CPU time (user + system, all threads) this rank's process
    spent per call: gloo's own cost on the worker's cores, which dtsim charges as a computation beside the
    overlapped backward (docs/collective-libraries.md, "Gloo on CPU ranks runs on the worker's cores").
    fit_comm reads only the times."""
    out = {"ranks": world, "pingpong": [], "allreduce": []}
    for size in BENCH_SIZES_B:
        t = torch.zeros(max(1, size // 4))
        times = []
        for _ in range(BENCH_REPEATS):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            elif rank == 1:
                dist.recv(t, 0)
                dist.send(t, 0)
            times.append((time.perf_counter() - t0) / 2)
        out["pingpong"].append({"bytes": size, "time_s": sorted(times)[len(times) // 2]})
        times, cpus = [], []
        for _ in range(BENCH_REPEATS):
            dist.barrier()
            c0 = own_cpu_s()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
            cpus.append(own_cpu_s() - c0)
        out["allreduce"].append({"bytes": size, "time_s": sorted(times)[len(times) // 2],
                                 "cpu_s": sorted(cpus)[len(cpus) // 2]})
    return out


def worker(rank, a, port, data, accuracy_before):
    torch.set_num_threads(a.threads)
    world = a.procs
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    report = bench_comm(rank, world) if a.bench_comm else train(a, rank, world, data, accuracy_before)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        text = json.dumps(report, indent=1)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        else:
            print(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="lenet5", help="lenet5, resnet18 or a GPT-2 config.json (model_type gpt2)")
    p.add_argument("--seq-len", type=int, default=0, help="tokens per sequence (language models; 0 = n_positions)")
    p.add_argument("--procs", type=int, default=1, help="processes (DDP over gloo when > 1)")
    p.add_argument("--parallel", default="dp", choices=["dp", "tp", "pp"],
                   help="dp: data parallel (DDP); tp: 2-way tensor parallel; pp: 2-stage 1F1B pipeline (GPT, 2 procs)")
    p.add_argument("--micro-batches", type=int, default=4, help="pp: micro-batches of --batch sequences per step")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--batch", type=int, default=32, help="samples per process and iteration")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--data", default="fashion-mnist", choices=["fashion-mnist", "synthetic"])
    p.add_argument("--side", type=int, default=28, help="image side (Fashion-MNIST is resized when not 28)")
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--test-samples", type=int, default=512)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bucket-cap-mb", type=float, default=DDP_BUCKET_CAP_MB, help="DDP bucket size, MiB")
    p.add_argument("--check-model", default="", help="dtsim layer table (JSON) the torch model must equal")
    p.add_argument("--bench-comm", action="store_true", help="measure gloo curves instead of training")
    p.add_argument("--out", default="", help="report file (default: stdout)")
    a = p.parse_args()
    for name in ("procs", "threads", "batch", "iterations", "side", "channels"):
        if getattr(a, name) < 1:
            raise SystemExit(f"train.py: --{name.replace('_', '-')}: expected >= 1, got {getattr(a, name)}")
    if a.bench_comm and a.procs < 2:
        raise SystemExit("train.py: --bench-comm needs --procs >= 2")
    if a.model not in ("lenet5", "resnet18") and not is_language_model(a.model):
        raise SystemExit(f"train.py: --model: expected lenet5, resnet18 or a GPT-2 config.json, got '{a.model}'")
    if a.parallel != "dp" and (not is_language_model(a.model) or a.procs != 2):
        raise SystemExit(f"train.py: --parallel {a.parallel}: a GPT config.json on --procs 2")
    if a.micro_batches < 1:
        raise SystemExit(f"train.py: --micro-batches: expected >= 1, got {a.micro_batches}")
    if a.seq_len < 0:
        raise SystemExit(f"train.py: --seq-len: expected >= 0, got {a.seq_len}")
    if is_language_model(a.model):
        positions = build_model(a.model, a.channels, a.side).positions
        a.seq_len = a.seq_len or positions
        if a.seq_len > positions:
            raise SystemExit(f"train.py: --seq-len: expected <= n_positions {positions}, got {a.seq_len}")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    if a.check_model:  # before any process starts, so a mismatch is this process's one-line error
        problems = check_model(build_model(a.model, a.channels, a.side), a.check_model, a.channels, a.side, a.seq_len)
        if problems:
            raise SystemExit("train.py: the torch model differs from dtsim's: " + "; ".join(problems))
    data, accuracy_before = None, 0.0
    if not a.bench_comm and a.parallel == "dp":
        torch.set_num_threads(a.threads)
        model = initial_model(a)
        data = load_run_data(a, model)
        accuracy_before = evaluate(model, data[2], data[3], a.batch)
        del model
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(worker, args=(a, port, data, accuracy_before), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
