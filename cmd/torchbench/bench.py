# The PyTorch side of torchbench: builds the network named on the command line, prints its
# parameter count, then runs training steps on request ("run N" on stdin, per-step milliseconds
# on stdout) until stdin closes, so the Go side can interleave its own steps with these.
import sys, time

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
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=classes)
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
    for line in sys.stdin:
        n = int(line.split()[1])
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
            times.append((time.perf_counter() - t0) * 1e3)
        print(" ".join("%.3f" % t for t in times), flush=True)


main()
