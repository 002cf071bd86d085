"""pnnx's ncnn files run in a process of their own, so that a crash of ncnn on them is the
peer's result (``runtime_crash``) and not the end of the node-test run that called it.

    python _pnnx_ncnn_runner.py m.ncnn.param m.ncnn.bin feeds.npz SETS OUTS out.npz

``feeds.npz`` holds ``s<j>_in<k>``: data set j's input k as float32, already in ncnn's blob
shape (a batch of 1 dropped). Each set is fed to ``in0``... and ``out0``... ``out<OUTS-1>`` are
read as float32 into ``out.npz`` as ``s<j>_out<k>``; a blob ncnn cannot compute is left out.
The net is ncnn's fp32 CPU net with one thread (``translator.proofs.ncnn.fp32_net``)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(param: str, weights: str, feeds_npz: str, sets: str, outs: str, out_npz: str) -> int:
    import ncnn

    from translator.proofs.ncnn import fp32_net

    net = fp32_net()
    if net.load_param(param) != 0 or net.load_model(weights) != 0:
        print("ncnn could not load pnnx's files", file=sys.stderr)
        return 3
    got = {}
    with np.load(feeds_npz, allow_pickle=False) as z:
        for j in range(int(sets)):
            ex = net.create_extractor()
            mats = [ncnn.Mat(np.ascontiguousarray(z[f"s{j}_in{k}"])).clone()
                    for k in range(sum(1 for n in z.files if n.startswith(f"s{j}_in")))]
            for k, m in enumerate(mats):
                ex.input(f"in{k}", m)
            for k in range(int(outs)):
                rc, m = ex.extract(f"out{k}")
                if rc == 0:
                    got[f"s{j}_out{k}"] = np.array(m, copy=True)
            del ex, mats
    np.savez(out_npz, **got)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
