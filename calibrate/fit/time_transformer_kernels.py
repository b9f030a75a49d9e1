#!/usr/bin/env python3
"""Times on a lent GPU the kernels of dtsim's transformer zoo (issue 38): cuBLAS GEMMs of the zoo's linear
layers (forward, backward-data, backward-weights; tensor-parallel splits; bf16, fp16, fp8, tf32, fp32),
scaled_dot_product_attention on the flash backend, and the memory-bound ops (norms, activations, softmax,
dropout, residual add). Each kernel is checked against a float64 reference on a slice before it is timed
(benchdnn's rule); a failed check or an unsupported case is counted as a skip, never timed.
Timing: CUDA events around each call, the L2 flushed before each (a 256 MiB write outside the events),
the host queue filled ahead behind torch.cuda._sleep so PyTorch's per-call host time does not pad the
GPU time; warm-up, then >= 10 repeats; the median is the figure, min/max beside it.
Writes OUT_DIR/{env.txt,gemm.csv,attention.csv,memops.csv,deepbench_gemm.csv,skips.csv}, row by row
(deepbench_gemm.csv: DeepBench's training GEMM shapes, the same as the H100's file, fp32 and fp16).
Usage: time_transformer_kernels.py OUT_DIR [--budget-s S] [--cpu-smoke] [--list]
  --cpu-smoke: tiny sizes on the CPU, to test the script without a GPU (no timing figures are meaningful).
  --list: print the planned GEMM counts and the estimated time per section, then exit.
"""
import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# The zoo: name -> (hidden, ffn, heads, kv_heads, head_dim, gated MLP, vocab, tokens per expert / tokens).
# Sources: HF config.json of each model (gpt2*, bert-*-uncased, meta-llama/Llama-2-*, Meta-Llama-3(.1)-*,
# mistralai/Mixtral-8x7B-v0.1); GPT-3 175B from Brown et al. 2020, Table 2.1.
MODELS = {
    "gpt2-small": (768, 3072, 12, 12, 64, False, 50257, 1.0),
    "gpt2-medium": (1024, 4096, 16, 16, 64, False, 50257, 1.0),
    "gpt2-large": (1280, 5120, 20, 20, 64, False, 50257, 1.0),
    "gpt2-xl": (1600, 6400, 25, 25, 64, False, 50257, 1.0),
    "bert-base": (768, 3072, 12, 12, 64, False, 30522, 1.0),
    "bert-large": (1024, 4096, 16, 16, 64, False, 30522, 1.0),
    "llama2-7b": (4096, 11008, 32, 32, 128, True, 32000, 1.0),
    "llama2-13b": (5120, 13824, 40, 40, 128, True, 32000, 1.0),
    "llama2-70b": (8192, 28672, 64, 8, 128, True, 32000, 1.0),
    "llama3-8b": (4096, 14336, 32, 8, 128, True, 128256, 1.0),
    "llama3-70b": (8192, 28672, 64, 8, 128, True, 128256, 1.0),
    "llama3-405b": (16384, 53248, 128, 8, 128, True, 128256, 1.0),
    # Mixtral: 8 experts, top-2 routing: an expert's MLP sees 2/8 of the tokens on average.
    "mixtral-8x7b": (4096, 14336, 32, 8, 128, True, 32000, 0.25),
    "gpt3-175b": (12288, 49152, 96, 96, 128, False, 50257, 1.0),
}
TPS = (1, 2, 4, 8)
TOKENS = (2048, 4096, 8192)
# Megatron-LM pads the vocabulary to a multiple of make-vocab-size-divisible-by (128) x tensor-parallel size
# (megatron/training/tokenizer: _vocab_size_with_padding).
VOCAB_DIVISOR = 128
PASSES = ("fwd", "bwd_data", "bwd_weights")
# Rough rates (FLOP/s) used only to plan within the time budget.
PLAN_RATE = {"bf16": 6.0e14, "fp16": 6.0e14, "fp8": 1.0e15, "tf32": 3.0e14, "fp32": 4.5e13}
# Which GEMMs each precision times: (tokens kept, largest FLOPs of one GEMM timed).
PLAN = {"bf16": (TOKENS, 1e14), "fp8": (TOKENS, 1e14), "fp16": ((4096,), 1e14),
        "tf32": ((4096,), 3e12), "fp32": ((2048,), 3e11)}
# Share of the budget each section may use before its remaining cases are skipped (in running order).
SECTION_SHARE = {"memops": 0.06, "attention": 0.12, "bf16": 0.34, "fp8": 0.12, "fp16": 0.10,
                 "tf32": 0.08, "fp32": 0.06, "deepbench": 0.08}
# Relative Frobenius error of a slice against float64 above which a result fails its check.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 2e-2, "fp16": 1e-2, "fp8": 2e-2}


def gemm_shapes(model, tp, tokens):
    """[(gemm, M, N, K)] of the forward linear layers of one tensor-parallel rank; None when tp does not
    divide the heads (Megatron requires it)."""
    h, ffn, heads, kv, hd, gated, vocab, expert_share = MODELS[model]
    if heads % tp or (kv % tp and kv >= tp) or ffn % tp:
        return None
    kv_local = max(kv // tp, 1)  # Megatron replicates kv heads when tp > kv heads
    div = VOCAB_DIVISOR * tp
    vocab_pad = (vocab + div - 1) // div * div
    out = [("qkv", tokens, (heads // tp + 2 * kv_local) * hd, h), ("attn_out", tokens, h, heads // tp * hd)]
    m_mlp = int(tokens * expert_share)
    out += [("mlp_up", m_mlp, ffn * (2 if gated else 1) // tp, h), ("mlp_down", m_mlp, h, ffn // tp),
            ("lm_head", tokens, vocab_pad // tp, h)]
    return out


def pass_shape(pas, m, n, k):
    """A forward GEMM y[M,N] = x[M,K] w[N,K]^T (nn.Linear) -> (M, N, K, a_transpose, b_transpose) of a pass,
    DeepBench's convention: A is M x K, stored transposed when 'T'."""
    if pas == "fwd":
        return m, n, k, "N", "T"
    if pas == "bwd_data":   # dx[M,K] = dy[M,N] w[N,K]
        return m, k, n, "N", "N"
    return n, k, m, "T", "N"  # dw[N,K] = dy[M,N]^T x[M,K]


def plan_gemms(prec):
    """Distinct GEMM cases of a precision: [(tag, M, N, K, ta, tb, pass)]; tag names the first use."""
    tokens_kept, max_flops = PLAN[prec]
    seen, out = set(), []
    for model in MODELS:
        for tp in TPS:
            for tokens in tokens_kept:
                shapes = gemm_shapes(model, tp, tokens)
                if shapes is None:
                    continue
                for gemm, m, n, k in shapes:
                    for pas in PASSES:
                        M, N, K, ta, tb = pass_shape(pas, m, n, k)
                        key = (M, N, K, ta, tb, pas if prec == "fp8" else "")
                        if key in seen or 2.0 * M * N * K > max_flops:
                            continue
                        seen.add(key)
                        out.append((f"{model}/{gemm}/tp{tp}/t{tokens}", M, N, K, ta, tb, pas))
    return out


def relerr(out, ref):
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Harness:
    def __init__(self, args):
        self.args = args
        self.dev = torch.device("cpu" if args.cpu_smoke else "cuda")
        self.t0 = time.monotonic()
        self.skips = {}
        self.skip_f = open(os.path.join(args.out, "skips.csv"), "w")
        self.skip_f.write("section,case,reason\n")
        self.flush_buf = None if args.cpu_smoke else torch.empty(256 << 20, dtype=torch.uint8, device=self.dev)
        self.gpu = "cpu-smoke" if args.cpu_smoke else torch.cuda.get_device_name().replace(",", " ")

    def elapsed(self):
        return time.monotonic() - self.t0

    def skip(self, section, case, reason):
        self.skips[section] = self.skips.get(section, 0) + 1
        self.skip_f.write(f"{section},{case},{reason}\n")
        self.skip_f.flush()

    def time(self, fn, min_reps=10):
        """(median, min, max) ms of fn over >= min_reps calls after warm-up (see the module's docstring)."""
        if self.args.cpu_smoke:
            fn()
            ts = []
            for _ in range(3):
                a = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - a) * 1e3)
            return statistics.median(ts), min(ts), max(ts)
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w = time.perf_counter()
        a.record()
        fn()
        b.record()
        host_ms = (time.perf_counter() - w) * 1e3  # the host's time to enqueue one call
        torch.cuda.synchronize()
        est = a.elapsed_time(b)
        reps = max(min_reps, min(30, int(10.0 / max(est, 1e-3))))  # ~10 ms of repeats for small kernels
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        # The GPU sleeps while the host enqueues every repeat, so no host gap falls inside a timed call
        # (_sleep counts clock cycles: ~2e6 per ms at the H200's ~2 GHz under load).
        torch.cuda._sleep(int(min(reps * (host_ms + 0.05), 50.0) * 2e6))
        for i in range(reps):
            self.flush_buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        ts = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
        return statistics.median(ts), ts[0], ts[-1]


def write_env(h, path):
    lines = [f"date_utc {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
             f"python {sys.version.split()[0]}", f"torch {torch.__version__}",
             f"torch.version.cuda {torch.version.cuda}",
             f"cudnn {torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else 'none'}"]
    if not h.args.cpu_smoke:
        p = torch.cuda.get_device_properties(0)
        lines += [f"gpu {p.name}", f"sm_count {p.multi_processor_count}", f"memory_bytes {p.total_memory}",
                  f"capability {p.major}.{p.minor}"]
        try:  # cuBLASLt's version from the library PyTorch loaded
            import ctypes
            torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
            libs = sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "libcublasLt" in ln})
            for lib in libs:
                lines.append(f"cublasLt {lib} version {ctypes.CDLL(lib).cublasLtGetVersion()}")
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            lines.append(f"cublasLt version unknown: {e!r}")
        for q in ("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu",):
            try:
                r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True,
                                   text=True, timeout=20)
                lines.append("nvidia-smi " + r.stdout.strip().replace("\n", " | "))
            except Exception as e:  # noqa: BLE001
                lines.append(f"nvidia-smi failed: {e!r}")
    with open(path, "a") as f:
        f.write("\n".join(lines) + "\n")


def smoke_shape(M, N, K):
    return min(M, 96), min(N, 80), min(K, 112)


def deepbench_cases(path):
    """DeepBench's training GEMM shapes, as timed on the H100 (calibrate/data/measured/h100_deepbench_gemm.csv)."""
    seen, out = set(), []
    for ln in open(path).read().splitlines()[1:]:
        c = ln.split(",")
        key = (int(c[3]), int(c[4]), int(c[5]), c[6], c[7])
        if key not in seen:
            seen.add(key)
            out.append(("deepbench",) + key + ("gemm",))
    return out


def run_gemms(h, prec, budget_end, cases=None, name="gemm.csv", label=None):
    path = os.path.join(h.args.out, name)
    sec = prec if label is None and name == "gemm.csv" else f"{name.split('_')[0]}-{label or prec}"
    new = not os.path.exists(path)
    f = open(path, "a")
    if new:
        f.write("gpu,precision,app,M,N,K,a_transpose,b_transpose,time_ms,pass,min_ms,max_ms,tflops,relerr\n")
    cases = plan_gemms(prec) if cases is None else cases
    random.Random(38).shuffle(cases)  # a budget cut leaves a random sample, not the small models only
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32,
          "fp8": torch.bfloat16}[prec]
    f8 = getattr(torch, "float8_e4m3fn", None)
    if prec == "fp8" and (f8 is None or not hasattr(torch, "_scaled_mm") or h.args.cpu_smoke):
        for c in cases:
            h.skip(sec, "/".join(map(str, c)), "no float8_e4m3fn/_scaled_mm here")
        return
    done = 0
    for tag, M, N, K, ta, tb, pas in cases:
        case = f"{tag}/{pas}/{M}x{N}x{K}{ta}{tb}"
        if h.elapsed() > budget_end:
            h.skip(sec, case, "time budget")
            continue
        if h.args.cpu_smoke:
            M, N, K = smoke_shape(M, N, K)
        if prec == "fp8" and (M % 16 or N % 16 or K % 16):
            h.skip(sec, case, "_scaled_mm needs dims divisible by 16")
            continue
        try:
            if prec == "fp8":
                # Transformer Engine's layout: both operands K-contiguous (TN in cuBLAS terms); it
                # transposes in its fp8 cast for dgrad/wgrad, so every pass runs this one layout.
                a = torch.randn(M, K, device=h.dev, dtype=dt).to(f8)
                b = torch.randn(N, K, device=h.dev, dtype=dt).to(f8).t()
                one = torch.ones((), device=h.dev, dtype=torch.float32)
                fast = pas == "fwd"  # TE's default recipe: split accumulator off for fprop, on for dgrad/wgrad
                def fn():  # noqa: E306
                    return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)
                ta, tb = "N", "T"
            else:
                a = torch.randn(K, M, device=h.dev, dtype=dt).t() if ta == "T" else torch.randn(M, K, device=h.dev, dtype=dt)
                b = torch.randn(N, K, device=h.dev, dtype=dt).t() if tb == "T" else torch.randn(K, N, device=h.dev, dtype=dt)
                def fn():  # noqa: E306
                    return a @ b
            c = fn()
            s = 128
            ref = a[:s].double() @ b[:, :s].double()
            err = relerr(c[:s, :s], ref)
            del c
            if not err <= TOLERANCE[prec]:
                h.skip(sec, case, f"check failed relerr={err:.3g}")
                continue
            med, lo, hi = h.time(fn)
            f.write(f"{h.gpu},{label or prec},{tag},{M},{N},{K},{ta},{tb},{med:.5f},{pas},{lo:.5f},{hi:.5f},"
                    f"{2.0 * M * N * K / (med * 1e-3) / 1e12:.2f},{err:.2e}\n")
            f.flush()
            done += 1
        except RuntimeError as e:  # out of memory, or a case this build does not support
            h.skip(sec, case, f"error {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        finally:
            a = b = None
    f.close()
    print(f"[{h.elapsed():6.1f}s] gemm {sec}: {done} timed, {h.skips.get(sec, 0)} skipped", flush=True)


def sdpa(q, k, v, causal, gqa):
    """Flash-backend SDPA; GQA through enable_gqa where this PyTorch has it."""
    kw = {"enable_gqa": True} if gqa else {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
    except ImportError:  # PyTorch < 2.3 (the CPU smoke test): attention as its torch ops, kv expanded
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        return torch.softmax(s, -1) @ v


def attention_ref(q, k, v, causal):
    """float64 attention of q [B,H,S,D] over k, v [B,KV,S,D]."""
    rep = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.repeat_interleave(rep, 1).double(), v.repeat_interleave(rep, 1).double()
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def attention_cases(smoke):
    """(dtype, batch, heads, kv_heads, seq, head_dim, causal)."""
    out = []
    for prec in ("bf16", "fp16"):
        for seq in (1024, 2048, 4096, 8192):
            for hd, hcfgs in ((64, ((12, 12), (16, 16))), (128, ((32, 32), (32, 8), (8, 8)))):
                for heads, kv in hcfgs:
                    for causal in (True, False):
                        for tokens in ((16384,) if prec == "fp16" else (8192, 32768)):
                            out.append((prec, max(tokens // seq, 1), heads, kv, seq, hd, causal))
    if smoke:
        out = [(p, 1, min(hh, 4), min(kv, 4) if kv == hh else min(kv, 2), 64, hd, c)
               for p, b, hh, kv, s, hd, c in out[:12]]
    return out


def run_attention(h, budget_end):
    f = open(os.path.join(h.args.out, "attention.csv"), "w")
    f.write("gpu,precision,backend,batch,heads,kv_heads,seq,head_dim,causal,pass,time_ms,min_ms,max_ms,tflops,relerr\n")
    checked = {}
    done = 0
    for prec, batch, heads, kv, seq, hd, causal in attention_cases(h.args.cpu_smoke):
        case = f"{prec}/b{batch}/h{heads}/kv{kv}/s{seq}/d{hd}/{'causal' if causal else 'full'}"
        if h.elapsed() > budget_end:
            h.skip("attention", case, "time budget")
            continue
        dt = torch.bfloat16 if prec == "bf16" else torch.float16
        if h.args.cpu_smoke:
            dt = torch.float32
        try:
            # Backward checked once per (dtype, heads, kv, head_dim, causal) on a small problem against float64.
            ck = (prec, heads, kv, hd, causal)
            if ck not in checked:
                s2 = min(seq, 512)
                q = torch.randn(1, heads, s2, hd, device=h.dev, dtype=dt, requires_grad=True)
                k = torch.randn(1, kv, s2, hd, device=h.dev, dtype=dt, requires_grad=True)
                v = torch.randn(1, kv, s2, hd, device=h.dev, dtype=dt, requires_grad=True)
                gy = torch.randn(1, heads, s2, hd, device=h.dev, dtype=dt)
                o = sdpa(q, k, v, causal, kv != heads)
                g = torch.autograd.grad(o, (q, k, v), gy)
                qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
                gr = torch.autograd.grad(attention_ref(qd, kd, vd, causal), (qd, kd, vd), gy.double())
                checked[ck] = max([relerr(o, attention_ref(q.detach(), k.detach(), v.detach(), causal))]
                                  + [relerr(a, b) for a, b in zip(g, gr)])
            q = torch.randn(batch, heads, seq, hd, device=h.dev, dtype=dt, requires_grad=True)
            k = torch.randn(batch, kv, seq, hd, device=h.dev, dtype=dt, requires_grad=True)
            v = torch.randn(batch, kv, seq, hd, device=h.dev, dtype=dt, requires_grad=True)
            o = sdpa(q, k, v, causal, kv != heads)
            # Forward checked on the full problem's first two kv groups of batch 0.
            nq = heads // kv * min(kv, 2)
            err = relerr(o[:1, :nq].detach(), attention_ref(q[:1, :nq].detach(), k[:1, :min(kv, 2)].detach(),
                                                             v[:1, :min(kv, 2)].detach(), causal))
            err = max(err, checked[ck])
            if not err <= 2e-2:
                h.skip("attention", case, f"check failed relerr={err:.3g}")
                continue
            gy = torch.randn_like(o)
            flops_fwd = 4.0 * batch * heads * seq * seq * hd * (0.5 if causal else 1.0)
            for pas, fn, fl in (("fwd", lambda: sdpa(q, k, v, causal, kv != heads), flops_fwd),
                                ("bwd", lambda: torch.autograd.grad(o, (q, k, v), gy, retain_graph=True),
                                 2.5 * flops_fwd)):
                med, lo, hi = h.time(fn)
                f.write(f"{h.gpu},{prec},flash,{batch},{heads},{kv},{seq},{hd},{int(causal)},{pas},{med:.5f},"
                        f"{lo:.5f},{hi:.5f},{fl / (med * 1e-3) / 1e12:.2f},{err:.2e}\n")
                f.flush()
            done += 1
        except RuntimeError as e:
            h.skip("attention", case, f"error {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        finally:
            q = k = v = o = gy = None
    f.close()
    print(f"[{h.elapsed():6.1f}s] attention: {done} timed, {h.skips.get('attention', 0)} skipped", flush=True)


def rmsnorm_torch(x, w, eps=1e-6):
    """HF LlamaRMSNorm as its torch ops: float32 variance, normalise, cast back, scale."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def memop_table():
    """op -> (number of [rows, cols] inputs, forward fn, reference fn (float64), fwd bytes / n, bwd bytes / n)
    with n the elements of one input, bf16 (2 B); bytes are the least a kernel must move (each input read
    once, each output written once; per-row statistics and the [cols] weights left out)."""
    def ln(x, w, b):
        return F.layer_norm(x, x.shape[-1:], w, b)
    tbl = {
        "layer_norm": (1, lambda x, p: ln(x, *p), lambda x, p: ln(x, *p), 4, 6),
        "rmsnorm_torch_ops": (1, lambda x, p: rmsnorm_torch(x, p[0]), lambda x, p: rmsnorm_torch(x, p[0]), 4, 6),
        "gelu_tanh": (1, lambda x, p: F.gelu(x, approximate="tanh"), lambda x, p: F.gelu(x, approximate="tanh"), 4, 6),
        "gelu_erf": (1, lambda x, p: F.gelu(x), lambda x, p: F.gelu(x), 4, 6),
        "silu_mul": (2, lambda x, p: F.silu(x[0]) * x[1], lambda x, p: F.silu(x[0]) * x[1], 6, 10),
        "softmax": (1, lambda x, p: torch.softmax(x, -1), lambda x, p: torch.softmax(x, -1), 4, 6),
        # dropout also writes / reads its bool mask: 1 B per element
        "dropout": (1, lambda x, p: F.dropout(x, 0.1, True), None, 5, 5),
        # the residual add's backward is no kernel (autograd passes the gradient on): forward only
        "residual_add": (2, lambda x, p: x[0] + x[1], lambda x, p: x[0] + x[1], 6, 0),
    }
    if hasattr(F, "rms_norm"):
        tbl["rms_norm_fused"] = (1, lambda x, p: F.rms_norm(x, x.shape[-1:], p[0], 1e-6),
                                 lambda x, p: rmsnorm_torch(x, p[0]), 4, 6)
    return tbl


def run_memops(h, budget_end):
    f = open(os.path.join(h.args.out, "memops.csv"), "w")
    f.write("gpu,precision,op,rows,cols,pass,bytes,time_ms,min_ms,max_ms,GBps,relerr\n")
    sizes = [(r, c) for r in (2048, 8192) for c in (768, 1600, 4096, 8192, 16384, 28672)]
    if h.args.cpu_smoke:
        sizes = [(64, 96), (128, 200)]
    done = 0
    for op, (nin, fwd, ref, bf, bb) in memop_table().items():
        for rows, cols in sizes:
            case = f"{op}/{rows}x{cols}"
            if h.elapsed() > budget_end:
                h.skip("memops", case, "time budget")
                continue
            dt = torch.bfloat16
            try:
                xs = [torch.randn(rows, cols, device=h.dev, dtype=dt, requires_grad=True) for _ in range(nin)]
                x = xs[0] if nin == 1 else xs
                p = [torch.randn(cols, device=h.dev, dtype=dt, requires_grad=True),
                     torch.randn(cols, device=h.dev, dtype=dt, requires_grad=True)]
                y = fwd(x, p)
                # check the first 64 rows, and the input gradient, against float64
                sl = [t[:64].detach().double().requires_grad_() for t in xs]
                psl = [t.detach().double().requires_grad_() for t in p]
                gy = torch.randn_like(y)
                if ref is not None:
                    yr = ref(sl[0] if nin == 1 else sl, psl)
                    err = relerr(y[:64].detach(), yr.detach())
                    if bb:
                        gx = torch.autograd.grad(y, xs, gy, retain_graph=True)
                        gr = torch.autograd.grad(yr, sl, gy[:64].double())
                        err = max([err] + [relerr(a[:64], b) for a, b in zip(gx, gr)])
                else:  # dropout: kept elements scaled by 1/(1-p), about p of them zero
                    yd, xd = y.detach().float(), xs[0].detach().float()
                    kept = yd != 0
                    zero_frac = 1 - kept.float().mean().item()
                    err = relerr(yd[kept], xd[kept] / 0.9) + abs(zero_frac - 0.1)
                if not err <= 2e-2:
                    h.skip("memops", case, f"check failed relerr={err:.3g}")
                    continue
                n = rows * cols
                todo = [("fwd", lambda: fwd(x, p), bf * n)]
                if bb:
                    ins = xs + {"layer_norm": p, "rmsnorm_torch_ops": p[:1], "rms_norm_fused": p[:1]}.get(op, [])
                    todo.append(("bwd", lambda: torch.autograd.grad(y, ins, gy, retain_graph=True), bb * n))
                for pas, fn, nbytes in todo:
                    med, lo, hi = h.time(fn)
                    f.write(f"{h.gpu},bf16,{op},{rows},{cols},{pas},{nbytes},{med:.5f},{lo:.5f},{hi:.5f},"
                            f"{nbytes / (med * 1e-3) / 1e9:.1f},{err:.2e}\n")
                    f.flush()
                done += 1
            except RuntimeError as e:
                h.skip("memops", case, f"error {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            finally:
                xs = x = y = gy = p = None
    f.close()
    print(f"[{h.elapsed():6.1f}s] memops: {done} timed, {h.skips.get('memops', 0)} skipped", flush=True)


def run_ceilings(h):
    """The two ceilings (METHOD.md): a device-to-device copy and an 8192^3 bf16 GEMM, random data."""
    if h.args.cpu_smoke:
        return
    src = torch.randn(1 << 30, device=h.dev, dtype=torch.bfloat16)  # 2 GiB
    dst = torch.empty_like(src)
    med, _, _ = h.time(lambda: dst.copy_(src))
    a = torch.randn(8192, 8192, device=h.dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=h.dev, dtype=torch.bfloat16)
    gm, _, _ = h.time(lambda: a @ b)
    with open(os.path.join(h.args.out, "env.txt"), "a") as f:
        f.write(f"ceiling copy_2GiB_read+write_GBps {2 * src.numel() * 2 / (med * 1e-3) / 1e9:.0f}\n"
                f"ceiling gemm_bf16_8192^3_TFLOPs {2 * 8192 ** 3 / (gm * 1e-3) / 1e12:.0f}\n")
    print(f"[{h.elapsed():6.1f}s] copy {2 * src.numel() * 2 / (med * 1e-3) / 1e9:.0f} GB/s, "
          f"bf16 gemm {2 * 8192 ** 3 / (gm * 1e-3) / 1e12:.0f} TFLOP/s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--budget-s", type=float, default=330)
    ap.add_argument("--cpu-smoke", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--deepbench-csv", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                            "measured", "h100_deepbench_gemm.csv"))
    ap.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    args = ap.parse_args()
    if args.list:
        for prec in PLAN:
            cases = plan_gemms(prec)
            est = sum(14 * 2.0 * c[1] * c[2] * c[3] / PLAN_RATE[prec] + 4e-3 for c in cases)
            print(f"{prec}: {len(cases)} GEMMs, ~{est:.0f} s")
        print(f"attention: {len(attention_cases(False))} cases")
        return
    os.makedirs(args.out, exist_ok=True)
    h = Harness(args)
    write_env(h, os.path.join(args.out, "env.txt"))
    with open(os.path.join(args.out, "env.txt"), "a") as f:
        f.write("command " + " ".join(sys.argv) + "\n")
    run_ceilings(h)
    only = set(filter(None, args.only.split(",")))
    end = h.elapsed()
    for section, share in SECTION_SHARE.items():
        end += share * args.budget_s
        if only and section not in only:
            continue
        end = max(end, h.elapsed())  # time a section left unused passes to the next
        if section == "memops":
            run_memops(h, end)
        elif section == "attention":
            run_attention(h, end)
        elif section == "deepbench":  # DeepBench's layout: fp32 with TF32 off, fp16 with fp32 accumulation
            half = h.elapsed() + (end - h.elapsed()) / 2
            run_gemms(h, "fp16", half, deepbench_cases(args.deepbench_csv), "deepbench_gemm.csv", "fp16_mixed")
            run_gemms(h, "fp32", end, deepbench_cases(args.deepbench_csv), "deepbench_gemm.csv")
        else:
            run_gemms(h, section, end)
        if not args.cpu_smoke:
            torch.cuda.empty_cache()
    h.skip_f.close()
    if not args.cpu_smoke:
        write_env(h, os.path.join(args.out, "env.txt"))  # clocks again, after the load
    print(f"[{h.elapsed():6.1f}s] done; skips {h.skips}", flush=True)


if __name__ == "__main__":
    main()
