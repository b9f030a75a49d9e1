"""Times with cuDNN (PyTorch, FP32, TF32 off) Inception-v3's asymmetric and 3x3 stride-2 convolutions beside
DeepBench's own `other`-family shapes, the three passes; CSV on stdout (docs/calibration.md §4b).
Usage: time_asym_convs.py   (on a machine with a CUDA GPU)
"""
import torch
import torch.nn.functional as F
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
# DeepBench conv shapes outside the w3/k1 families: (N, C, H, W, K, R, S, pad_h, pad_w, stride)
DEEPBENCH = [(4, 1, 161, 700, 32, 5, 20, 0, 0, 2), (4, 32, 79, 341, 32, 5, 10, 0, 0, 2),
             (8, 1, 161, 700, 32, 5, 20, 0, 0, 2), (8, 3, 108, 108, 64, 3, 3, 1, 1, 2),
             (8, 32, 79, 341, 32, 5, 10, 0, 0, 2), (16, 1, 161, 700, 32, 5, 20, 0, 0, 2),
             (16, 1, 161, 700, 64, 5, 5, 1, 1, 2), (16, 3, 224, 224, 64, 7, 7, 3, 3, 2),
             (16, 32, 79, 341, 32, 5, 10, 0, 0, 2), (16, 64, 80, 350, 128, 5, 5, 1, 1, 2),
             (16, 128, 40, 175, 256, 5, 5, 1, 1, 2), (16, 192, 28, 28, 32, 5, 5, 2, 2, 1),
             (16, 256, 20, 84, 512, 5, 5, 1, 1, 2), (16, 512, 14, 14, 48, 5, 5, 2, 2, 1),
             (16, 832, 7, 7, 128, 5, 5, 2, 2, 1), (32, 1, 161, 700, 32, 5, 20, 0, 0, 2),
             (32, 32, 79, 341, 32, 5, 10, 0, 0, 2)]
# Inception-v3 (TF-slim layout) at batch 64, same fields
INCEPTION = [(64, 768, 17, 17, 128, 1, 7, 0, 3, 1), (64, 128, 17, 17, 128, 7, 1, 3, 0, 1),
             (64, 128, 17, 17, 192, 7, 1, 3, 0, 1), (64, 128, 17, 17, 192, 1, 7, 0, 3, 1),
             (64, 160, 17, 17, 160, 1, 7, 0, 3, 1), (64, 160, 17, 17, 160, 7, 1, 3, 0, 1),
             (64, 160, 17, 17, 192, 7, 1, 3, 0, 1), (64, 192, 17, 17, 192, 1, 7, 0, 3, 1),
             (64, 192, 17, 17, 192, 7, 1, 3, 0, 1), (64, 384, 8, 8, 384, 1, 3, 0, 1, 1),
             (64, 384, 8, 8, 384, 3, 1, 1, 0, 1), (64, 3, 299, 299, 32, 3, 3, 0, 0, 2),
             (64, 288, 35, 35, 384, 3, 3, 0, 0, 2), (64, 96, 35, 35, 96, 3, 3, 0, 0, 2),
             (64, 192, 17, 17, 320, 3, 3, 0, 0, 2), (64, 192, 17, 17, 192, 3, 3, 0, 0, 2)]
def ms(fn, reps=20):
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps
print("source,N,C,H,W,K,R,S,stride,flops,out,fwd_ms,bwd_data_ms,bwd_weights_ms")
for src, shapes in (("deepbench", DEEPBENCH), ("inception_v3", INCEPTION)):
    for n, c, h, w, k, r, s, ph, pw, u in shapes:
        x, wt = torch.randn(n, c, h, w, device="cuda"), torch.randn(k, c, r, s, device="cuda")
        kw = dict(stride=u, padding=(ph, pw))
        y = F.conv2d(x, wt, **kw)
        gy = torch.randn_like(y)
        t = (ms(lambda: F.conv2d(x, wt, **kw)), ms(lambda: torch.nn.grad.conv2d_input(x.shape, wt, gy, **kw)),
             ms(lambda: torch.nn.grad.conv2d_weight(x, wt.shape, gy, **kw)))
        flops = 2.0 * y.numel() * c * r * s
        print(f"{src},{n},{c},{h},{w},{k},{r},{s},{u},{flops:.0f},{y.numel()}," + ",".join(f"{v:.4f}" for v in t), flush=True)
