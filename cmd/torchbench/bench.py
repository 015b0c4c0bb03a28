# The PyTorch side of torchbench: builds the network named on the command line, prints its
# parameter count, then runs training steps on request ("run N" on stdin, per-step milliseconds
# on stdout) until stdin closes, so the Go side can interleave its own steps with these.
# "prof N" runs N more steps under torch.profiler and prints one JSON line: each aten op's self
# CPU milliseconds a step (key_averages' self time, so the ops add up to the step), with the
# optimizer's ops (zero_grad and step) gathered under "optimizer".
import json, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """models.Build("smallcnn"): conv-bn-relu, a residual block, max-pool, a conv-bn-relu
    concatenated with its input, max-pool, linear."""

    def __init__(self, cin, h, w, classes, c=16):
        super().__init__()
        conv = lambda i: nn.Conv2d(i, c, 3, 1, 1, bias=False)
        self.conv1, self.bn1 = conv(cin), nn.BatchNorm2d(c)
        self.bconv1, self.bbn1 = conv(c), nn.BatchNorm2d(c)
        self.bconv2, self.bbn2 = conv(c), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = conv(c), nn.BatchNorm2d(c)
        self.fc = nn.Linear(2 * c * (h // 4) * (w // 4), classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        r = F.relu(self.bbn1(self.bconv1(h)))
        r = self.bbn2(self.bconv2(r))
        h = F.max_pool2d(F.relu(r + h), 2, 2)
        h2 = F.relu(self.bn2(self.conv2(h)))
        h = F.max_pool2d(torch.cat([h, h2], 1), 2, 2)
        return self.fc(torch.flatten(h, 1))


def build(name, cin, h, w, classes):
    if name == "smallcnn":
        return SmallCNN(cin, h, w, classes)
    if name in ("resnet18", "resnet50"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=classes)
    raise SystemExit("unknown model " + name)


def main():
    name, batch, cin, h, w, classes, threads = sys.argv[1], *map(int, sys.argv[2:8])
    torch.manual_seed(1)
    torch.set_num_threads(threads)
    net = build(name, cin, h, w, classes)
    net.train()
    x = torch.randn(batch, cin, h, w)
    y = torch.randint(0, classes, (batch,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    print("params", sum(p.numel() for p in net.parameters()), flush=True)

    def step(mark=None):
        if mark is None:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
            return
        with mark("optimizer"):
            opt.zero_grad()
        loss_fn(net(x), y).backward()
        with mark("optimizer"):
            opt.step()

    for line in sys.stdin:
        cmd, n = line.split()[0], int(line.split()[1])
        if cmd == "prof":
            print(json.dumps(profile(step, n)), flush=True)
            continue
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        print(" ".join("%.3f" % t for t in times), flush=True)


def profile(step, n):
    """Self CPU ms a step per aten op name over n profiled steps; events inside an
    "optimizer" mark count as "optimizer"."""
    from torch.profiler import ProfilerActivity, profile as prof, record_function

    t0 = time.perf_counter()
    with prof(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(n):
            step(record_function)
    wall = (time.perf_counter() - t0) * 1e3 / n
    ops = {}
    for e in p.events():
        name, a = e.name, e
        while a is not None:
            if a.name == "optimizer":
                name = "optimizer"
                break
            a = a.cpu_parent
        ops[name] = ops.get(name, 0.0) + e.self_cpu_time_total / 1e3 / n
    return {"steps": n, "wall_ms": wall, "ops": ops}


main()
