"""The GPU peer of the GPT step bench: the same model as tools/bench/peers/torch_gpt.py (dims from
the flags), PyTorch eager on CUDA, float32 with TF32 off (our cuBLAS matmuls do not use TF32),
AdamW, one synthetic batch per step. Prints one line:
  RESULT peer=torch_eager_cuda ms_per_step=M tokens_per_s=T gemm_gflop_per_step=G params=P device=...

  python3 tools/gpu/torch_gpt_cuda.py --vocab 8192 --seq_len 512 --n_layer 12 --n_embd 768 --n_head 12 --batch 8
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "peers"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("vocab", 8192), ("seq_len", 512), ("n_layer", 12), ("n_embd", 768), ("n_head", 12),
                          ("batch", 8), ("steps", 30), ("warmup", 5)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    import torch
    import torch_gpt

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dims = torch_gpt.GptDims(vocab=a.vocab, seq_len=a.seq_len, n_layer=a.n_layer, n_embd=a.n_embd, n_head=a.n_head)
    model = torch_gpt.build("portable", 0, dims).cuda()
    opt = torch_gpt.adamw(model.parameters())
    batches = [tuple(t.cuda() for t in torch_gpt.synthetic_batch(s, a.batch, dims)) for s in range(8)]

    def step(s):
        x, y = batches[s % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    for s in range(a.warmup):
        step(s)
    torch.cuda.synchronize()
    times = []
    for s in range(a.steps):
        t0 = time.perf_counter()
        step(s)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    ms = 1e3 * times[len(times) // 2]
    params = sum(p.numel() for p in model.parameters())
    print("RESULT peer=torch_eager_cuda ms_per_step=%.3f tokens_per_s=%.0f gemm_gflop_per_step=%.3f params=%d device=%s"
          % (ms, a.batch * a.seq_len / (ms / 1e3), torch_gpt.gemm_gflop_per_step(a.batch, dims), params,
             torch.cuda.get_device_name(0).replace(" ", "_")), flush=True)


if __name__ == "__main__":
    main()
