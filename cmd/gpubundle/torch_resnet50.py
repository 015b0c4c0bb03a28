#!/usr/bin/env python3
"""PyTorch's side of the GPU bundle: torchvision ResNet-50 training steps, timed.

float32 with TF32 off (as ours), SGD with momentum 0.9, synthetic data on the device, a warm-up
step and then timed steps, each ended by torch.cuda.synchronize. Three parts, in this order:

  capped    under a memory cap (--cap, default 16 GiB, the paper's V100; through
            torch.cuda.set_per_process_memory_fraction), at the batches ours trained out of core
            (--ours, the sweeps' JSON files, else --batches): in core while it fits, then, at the batches in
            core does not fit, torch.autograd.graph.save_on_cpu(pin_memory=True) and
            torch.utils.checkpoint (checkpoint_sequential, one segment per stage);
  uncapped  in core with the whole device, batches increasing until out of memory;

and each stops when --time-limit is near. Every result is written to --out as it comes (JSON,
replaced atomically), so a run killed from outside keeps what it measured. Without torch,
torchvision or CUDA it writes a JSON saying so and exits 0. --device cpu runs every mode at
every batch (there is no cap and no out of memory there): it is how the tests prove the script.
"""
import argparse
import gc
import inspect
import json
import os
import sys
import time

INSTALL = "apt-get install -y python3-torch python3-torchvision"


def parse_bytes(s):
    units = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    s = s.strip()
    for u in sorted(units, key=len, reverse=True):
        if u and s.endswith(u):
            return int(float(s[: -len(u)]) * units[u])
    return int(s)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--batches", default="32,64,128,256,384,512,768,1024",
                   help="batch sizes when --ours has none; also the first steps of the uncapped sweep")
    p.add_argument("--ours", default="", help="ooc sweep's JSON files, comma-separated: the batches their window or hybrid rows trained are the capped part's")
    p.add_argument("--cap", default="16GiB", help="the capped part's device memory")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--time-limit", type=float, default=120, help="seconds: start no measurement after this")
    p.add_argument("--max-batch", type=int, default=4096)
    p.add_argument("--host-fraction", type=float, default=0.6,
                   help="save_on_cpu is skipped where its estimated pinned host memory passes this share of MemAvailable")
    a = p.parse_args(argv)
    a.batch_list = sorted({int(b) for b in a.batches.split(",") if b.strip()})
    if not a.batch_list or min(a.batch_list) < 1 or a.steps < 1 or a.warmup < 0 or a.time_limit <= 0:
        p.error("want positive --batches, --steps and --time-limit, and --warmup >= 0")
    a.cap_bytes = parse_bytes(a.cap)
    return a


class Report:
    """The JSON document, written out whole after every change."""

    def __init__(self, path, args):
        self.path = path
        self.start = time.time()
        self.doc = {"status": "running", "reason": "", "model": "resnet50", "image": args.image,
                    "classes": args.classes, "optimizer": "SGD lr 0.01 momentum 0.9", "dtype": "float32",
                    "tf32": False, "device": args.device, "warmup_steps": args.warmup, "timed_steps": args.steps,
                    "cap_bytes": args.cap_bytes, "results": [], "notes": []}

    def set(self, **kw):
        self.doc.update(kw)
        self.write()

    def note(self, s):
        self.doc["notes"].append(s)
        self.write()

    def add(self, r):
        self.doc["results"].append(r)
        self.write()

    def write(self):
        self.doc["elapsed_s"] = round(time.time() - self.start, 3)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.path)


def our_batches(paths):
    """The batch sizes at which the window or hybrid rows of ooc sweep's JSON files (comma-separated) trained."""
    batches = set()
    for path in filter(None, paths.split(",")):
        try:
            with open(path) as f:
                rs = json.load(f)
        except (OSError, ValueError):
            continue
        batches |= {r["batch"] for r in rs if r.get("ok") and r.get("scheduler") != "baseline"}
    return sorted(batches)


def host_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def is_oom(e):
    return "out of memory" in str(e).lower() or type(e).__name__ == "OutOfMemoryError"


class Bench:
    def __init__(self, torch, torchvision, args):
        self.torch, self.args = torch, args
        # With its index: set_per_process_memory_fraction refuses torch.device("cuda") without one.
        self.dev = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        torch.manual_seed(1)
        self.model = torchvision.models.resnet50(num_classes=args.classes).to(self.dev)
        self.model.train()
        m = self.model
        stem = torch.nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool)
        self.trunk = torch.nn.Sequential(stem, m.layer1, m.layer2, m.layer3, m.layer4)
        self.opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()
        ck = torch.utils.checkpoint
        self.reentrant_only = "use_reentrant" not in inspect.signature(ck.checkpoint_sequential).parameters
        if self.reentrant_only:
            try:  # torch 1.13 takes use_reentrant through **kwargs only in checkpoint, not checkpoint_sequential
                ck.checkpoint_sequential(torch.nn.Sequential(torch.nn.Identity()), 1,
                                         torch.zeros(1, requires_grad=True), use_reentrant=False)
                self.reentrant_only = False
            except (TypeError, ValueError):
                pass

    def sync(self):
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def forward(self, x, mode):
        torch, m = self.torch, self.model
        if mode == "checkpoint":
            ck = torch.utils.checkpoint
            if self.reentrant_only:
                h = ck.checkpoint_sequential(self.trunk, len(self.trunk), x.requires_grad_(True))
            else:
                h = ck.checkpoint_sequential(self.trunk, len(self.trunk), x, use_reentrant=False)
        else:
            h = self.trunk(x)
        return m.fc(torch.flatten(m.avgpool(h), 1))

    def step(self, x, y, mode):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        if mode == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=self.dev.type == "cuda"):
                out = self.forward(x, mode)
                loss = self.loss(out, y)
        else:
            loss = self.loss(self.forward(x, mode), y)
        loss.backward()
        self.opt.step()

    def clean(self):
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        if self.dev.type == "cuda":
            self.torch.cuda.empty_cache()

    def measure(self, batch, mode, capped):
        """One point: a warm-up, then timed steps; the result's dict."""
        torch, a = self.torch, self.args
        r = {"mode": mode, "capped": capped, "batch": batch, "ok": False, "ips": 0.0, "step_s": [], "error": ""}
        x = y = None
        try:
            if self.dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.dev)
            x = torch.randn(batch, 3, a.image, a.image, device=self.dev)
            y = torch.randint(0, a.classes, (batch,), device=self.dev)
            for _ in range(a.warmup):
                self.step(x, y, mode)
            self.sync()
            for _ in range(a.steps):
                t0 = time.perf_counter()
                self.step(x, y, mode)
                self.sync()
                r["step_s"].append(round(time.perf_counter() - t0, 6))
            med = sorted(r["step_s"])[len(r["step_s"]) // 2]
            r.update(ok=True, ips=round(batch / med, 3), median_step_s=med)
            if self.dev.type == "cuda":
                r["peak_bytes"] = torch.cuda.max_memory_allocated(self.dev)
        except Exception as e:  # out of memory, or anything else: recorded, and the run goes on
            r["error"] = ("out of memory: " if is_oom(e) else "") + str(e).split("\n")[0][:300]
            r["oom"] = is_oom(e)
        finally:
            del x, y
            self.clean()
        return r


def capped_part(b, rep, batches, deadline):
    """At each batch, in core while it fits under the cap, then save_on_cpu and checkpoint."""
    torch, a = b.torch, b.args
    cuda = b.dev.type == "cuda"
    if cuda:
        total = torch.cuda.get_device_properties(b.dev).total_memory
        frac = min(1.0, a.cap_bytes / total)
        torch.cuda.set_per_process_memory_fraction(frac, b.dev.index)
        rep.set(cap_fraction=frac, device_memory_bytes=total)
    try:
        alive = {"in_core": True, "save_on_cpu": True, "checkpoint": True}
        per_image = None
        for batch in batches:
            # On the CPU there is no cap and no out of memory: every mode runs at every batch.
            if not cuda:
                modes = ["in_core", "save_on_cpu", "checkpoint"]
            elif alive["in_core"]:
                modes = ["in_core"]
            else:
                modes = ["save_on_cpu", "checkpoint"]
            while modes:
                mode = modes.pop(0)
                if not alive[mode]:
                    continue
                if time.time() >= deadline:
                    rep.note("capped part stopped at the time limit before batch %d %s" % (batch, mode))
                    return
                if mode == "save_on_cpu" and per_image and cuda:
                    need, avail = per_image * batch, host_available()
                    if avail and need > a.host_fraction * avail:
                        alive[mode] = False
                        rep.add({"mode": mode, "capped": True, "batch": batch, "ok": False, "ips": 0.0, "step_s": [],
                                 "error": "skipped: an estimated %.1f GiB of pinned host memory, over %.0f%% of the %.1f GiB available"
                                 % (need / 2**30, 100 * a.host_fraction, avail / 2**30)})
                        continue
                r = b.measure(batch, mode, True)
                rep.add(r)
                if cuda and not r["ok"]:
                    alive[mode] = False  # a larger batch needs more memory, not less
                if mode == "in_core" and r["ok"] and r.get("peak_bytes"):
                    per_image = r["peak_bytes"] / batch  # at most the activations saved per image, and more
                if mode == "in_core" and cuda and not r["ok"]:
                    fit = [x["batch"] for x in rep.doc["results"] if x["mode"] == "in_core" and x["capped"] and x["ok"]]
                    rep.set(in_core_max_batch_capped=max(fit or [0]))
                    modes = ["save_on_cpu", "checkpoint"]
            if cuda and not alive["in_core"] and not alive["save_on_cpu"] and not alive["checkpoint"]:
                rep.note("capped part: every mode stopped by batch %d" % batch)
                return
    finally:
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0, b.dev.index)


def uncapped_part(b, rep, start_batches, deadline):
    """In core with the whole device: batches increasing (the list, then by its last step) until out of memory."""
    a = b.args
    batches = list(start_batches)
    i = 0
    while i < len(batches):
        batch = batches[i]
        if time.time() >= deadline:
            rep.note("uncapped part stopped at the time limit before batch %d" % batch)
            return
        r = b.measure(batch, "in_core", False)
        rep.add(r)
        if not r["ok"]:
            break
        rep.set(in_core_max_batch=batch)
        if i == len(batches) - 1:
            step = batches[-1] - batches[-2] if len(batches) > 1 else batches[-1]
            if batch + step <= a.max_batch:
                batches.append(batch + step)
        i += 1


def main(argv):
    a = parse_args(argv)
    rep = Report(a.out, a)
    deadline = rep.start + a.time_limit
    try:
        import torch
    except Exception as e:
        rep.set(status="skipped", reason="no torch in %s: %s" % (sys.executable, e), install=INSTALL)
        return 0
    rep.set(torch=torch.__version__, python=sys.version.split()[0])
    try:
        import torchvision
    except Exception as e:
        rep.set(status="skipped", reason="no torchvision: %s" % e, install=INSTALL)
        return 0
    rep.set(torchvision=torchvision.__version__)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            rep.set(status="skipped", reason="torch %s sees no CUDA device (torch.version.cuda %s)" % (torch.__version__, torch.version.cuda))
            return 0
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        rep.set(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                cudnn=torch.backends.cudnn.version(), cudnn_benchmark=torch.backends.cudnn.benchmark)
    ours = our_batches(a.ours)
    capped = ours or a.batch_list
    rep.set(capped_batches=capped, capped_batches_from="ooc sweep (%s)" % a.ours if ours else "--batches",
            host_available_bytes=host_available())
    try:
        b = Bench(torch, torchvision, a)
        capped_part(b, rep, capped, deadline)
        if a.device == "cuda":
            uncapped_part(b, rep, a.batch_list, deadline)
    except Exception as e:
        rep.set(status="error", reason="%s: %s" % (type(e).__name__, str(e).split("\n")[0][:300]))
        return 0
    stopped = any("time limit" in n for n in rep.doc["notes"])
    rep.set(status="partial" if stopped else "ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
