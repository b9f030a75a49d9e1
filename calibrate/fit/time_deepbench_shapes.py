"""Times DeepBench's training convolution and GEMM shapes with cuDNN/cuBLAS (PyTorch) on the lent GPU, FP32
(TF32 off) and FP16 (tensor cores), and writes them in DeepBench's CSV layout (calibrate/data/measured/).
Usage: time_deepbench_shapes.py SHAPES GPU_NAME OUT_DIR   (SHAPES: repr((conv_shapes, gemm_shapes)))
"""
import ast
import sys
import torch
import torch.nn.functional as F
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
convs, gemms = ast.literal_eval(open(sys.argv[1]).read())
gpu, out = sys.argv[2], sys.argv[3]
def ms(fn, reps=10):
    """GPU time of one call: `reps` calls captured in a CUDA graph and replayed, so that PyTorch's per-call
    host overhead (~20 us) does not pad the small kernels (DeepBench times back-to-back C++ calls)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps
with open(f"{out}/conv.csv", "w") as f:
    f.write("gpu,precision,app,W,H,C,N,K,R,S,pad_w,pad_h,stride_w,stride_h,fwd_ms,bwd_input_ms,bwd_weights_ms\n")
    for prec, dt in (("fp32", torch.float32), ("fp16", torch.float16)):
        for n, c, h, w, k, r, s, ph, pw, u, v in convs:
            x = torch.randn(n, c, h, w, device="cuda", dtype=dt)
            wt = torch.randn(k, c, r, s, device="cuda", dtype=dt)
            kw = dict(stride=(u, v), padding=(ph, pw))
            gy = torch.randn_like(F.conv2d(x, wt, **kw))
            t = (ms(lambda: F.conv2d(x, wt, **kw)), ms(lambda: torch.nn.grad.conv2d_input(x.shape, wt, gy, **kw)),
                 ms(lambda: torch.nn.grad.conv2d_weight(x, wt.shape, gy, **kw)))
            f.write(f"{gpu},{prec},,{w},{h},{c},{n},{k},{r},{s},{pw},{ph},{v},{u}," + ",".join(f"{x:.4f}" for x in t) + "\n")
            f.flush()
with open(f"{out}/gemm.csv", "w") as f:
    f.write("gpu,precision,app,M,N,K,a_transpose,b_transpose,time_ms\n")
    for prec, dt in (("fp32", torch.float32), ("fp16", torch.float16)):
        for m, n, k, ta, tb in gemms:
            a = torch.randn(k, m, device="cuda", dtype=dt).t() if ta == "T" else torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt).t() if tb == "T" else torch.randn(k, n, device="cuda", dtype=dt)
            f.write(f"{gpu},{prec},,{m},{n},{k},{ta},{tb},{ms(lambda: a @ b):.4f}\n")
