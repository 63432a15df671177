"""The GPU GEMM benchmark's cases on PyTorch, measured the same way
(F.linear(x, w) with w [n, k], the device synchronized every iteration), so
the kit reports mixrt's GEMM rate as a ratio to PyTorch's on the same GPU in
the same run. Skips itself where PyTorch or a CUDA device is missing.

    python3 pytorch_gemm_peer.py OUT.json
"""
import json
import sys
import time


def main():
    try:
        import torch
    except ImportError:
        print("pytorch_gemm_peer: skipped: no torch")
        return 0
    if not torch.cuda.is_available():
        print("pytorch_gemm_peer: skipped: torch sees no CUDA device")
        return 0
    shapes = [(4096, 4096, 4096), (512, 4096, 4096), (16, 4096, 4096)]
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    rows = []
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for m, n, k in shapes:
            for name, dtype in dtypes.items():
                if tf32 and name != "f32":
                    continue
                x = torch.randn(m, k, device="cuda", dtype=dtype)
                w = torch.randn(n, k, device="cuda", dtype=dtype)
                for _ in range(3):
                    torch.nn.functional.linear(x, w)
                torch.cuda.synchronize()
                iters, start = 0, time.perf_counter()
                while time.perf_counter() - start < 0.3:
                    torch.nn.functional.linear(x, w)
                    torch.cuda.synchronize()
                    iters += 1
                seconds = (time.perf_counter() - start) / iters
                rows.append({"shape": f"{m}x{n}x{k}",
                             "dtype": "tf32" if tf32 else name,
                             "tflops": 2.0 * m * n * k / seconds / 1e12})
                print(f"{rows[-1]['shape']} {rows[-1]['dtype']}: "
                      f"{rows[-1]['tflops']:.1f} TFLOP/s")
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "gemm": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
