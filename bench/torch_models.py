"""PyTorch twins of dtrain's zoo models (lib/nn/zoo.cpp, lib/nn/zoo_resnet.cpp), layer for layer:
the same layer sizes, biases, pooling (kernel, stride, padding, ceil mode), LRN, dropout and batch
norm, in the same order, so that a benchmark times the same work on both sides and the parameter
counts equal the `parameters: N` line of `dtrain --dry-run` (gpu_vs_pytorch.py --check-models
compares them). Initialisation is PyTorch's default: irrelevant to throughput.

    build({"name": "resnet18"}, shape=(3, 224, 224), classes=1000)
"""
import torch.nn as nn


def mlp(hidden=(500, 500), inputs=784, classes=10, inplace=True):
    """flatten → (linear → relu)* → linear; 784-500-500-10 has 648,010 parameters."""
    layers = [nn.Flatten()]
    for width in hidden:
        layers += [nn.Linear(inputs, width), nn.ReLU(inplace=inplace)]
        inputs = width
    layers.append(nn.Linear(inputs, classes))
    return nn.Sequential(*layers)


def lenet(channels=1, side=28, classes=10, inplace=True):
    """conv 6@5x5 (pad 2 below 32 pixels) → relu → maxpool 2 → conv 16@5x5 → relu → maxpool 2 →
    fc 120 → relu → fc 84 → relu → fc classes."""
    pad = 2 if side < 32 else 0
    s = ((side + 2 * pad - 4) // 2 - 4) // 2
    return nn.Sequential(nn.Conv2d(channels, 6, 5, padding=pad), nn.ReLU(inplace=inplace),
                         nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(inplace=inplace),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * s * s, 120),
                         nn.ReLU(inplace=inplace), nn.Linear(120, 84), nn.ReLU(inplace=inplace),
                         nn.Linear(84, classes))


def alexnet(channels=3, side=224, classes=1000, lrn=False, dropout=0.5):
    """torchvision's AlexNet (61,100,840 parameters at 224x224, 1000 classes) without its adaptive
    pool (the identity at 224x224; dtrain flattens whatever the features give); `lrn` inserts
    Krizhevsky et al.'s response normalisation (size 5, alpha 1e-4, beta 0.75, k 2) after the
    first two ReLUs, as dtrain's `{name: alexnet, lrn: true}`."""
    def norm():
        return [nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)] if lrn else []

    s = (side + 4 - 11) // 4 + 1  # conv1
    for _ in range(3):  # the three 3x3/2 max pools
        s = (s - 3) // 2 + 1
    return nn.Sequential(
        nn.Conv2d(channels, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True), *norm(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), *norm(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Flatten(),
        nn.Dropout(dropout), nn.Linear(256 * s * s, 4096), nn.ReLU(inplace=True),
        nn.Dropout(dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
        nn.Linear(4096, classes))


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: conv3x3-bn-relu-conv3x3-bn + shortcut (a 1x1 projection
    with batch norm where the shape changes: option B), relu."""

    def __init__(self, inputs, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inputs != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet18(channels=3, side=224, classes=1000, small_input=None):
    """torchvision's ResNet-18 (11,689,512 parameters at 1000 classes). `small_input` (default:
    inputs of at most 64 pixels, as dtrain's `auto`) swaps the 7x7/2 stem and its max pool for a
    3x3/1 convolution."""
    if small_input is None:
        small_input = side <= 64
    if small_input:
        stem = [nn.Conv2d(channels, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                nn.ReLU(inplace=True)]
    else:
        stem = [nn.Conv2d(channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    blocks, inputs = [], 64
    for stage in range(4):
        planes = 64 << stage
        for i in range(2):
            blocks.append(BasicBlock(inputs, planes, 2 if stage > 0 and i == 0 else 1))
            inputs = planes
    return nn.Sequential(*stem, *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, classes))


def build(zoo, shape, classes):
    """The twin of dtrain's `model:` map `zoo` for samples of `shape` (C, H, W)."""
    name = zoo["name"]
    channels, side = shape[0], max(shape[1], shape[2])
    if name == "mlp":
        inputs = shape[0] * shape[1] * shape[2]
        return mlp(tuple(zoo.get("hidden", (500, 500))), inputs, classes)
    if name == "lenet":
        return lenet(channels, side, classes)
    if name == "alexnet":
        return alexnet(channels, side, classes, zoo.get("lrn", False), zoo.get("dropout", 0.5))
    if name == "resnet18":
        small = zoo.get("small_input", "auto")
        return resnet18(channels, side, classes, None if small == "auto" else bool(small))
    raise ValueError(f"no PyTorch twin of dtrain's zoo model '{name}'")


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())
