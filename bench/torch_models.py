"""PyTorch twins of dtrain's zoo models (lib/nn/zoo.cpp, lib/nn/zoo_resnet.cpp), layer for layer:
the same layer sizes, biases, pooling (kernel, stride, padding, ceil mode), LRN, dropout and batch
norm, in the same order, so that a benchmark times the same work on both sides and the parameter
counts equal the `parameters: N` line of `dtrain --dry-run` (gpu_vs_pytorch.py --check-models
compares layers and counts, engine_vs_pytorch.py the counts of the models it runs).
Initialisation is PyTorch's default: irrelevant to throughput.

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


def cifar_cnn(channels=3, side=32, classes=100, lrn=False):
    """The Pipe-SGD paper's CIFAR network (cuda-convnet / Caffe's cifar10_quick): conv 32@5x5 →
    maxpool 3/2 → relu [→ LRN size 3, alpha 5e-5, beta 0.75, k 1] → conv 32@5x5 → relu → avgpool
    3/2 → conv 64@5x5 → relu → avgpool 3/2 → fc 64 → fc classes (no ReLU between the two fcs, as
    in Caffe); every pooling in ceil mode, the average pools over the window part inside the
    input. 151,428 parameters at 32x32 and 100 classes."""
    def pool(max_pool):
        return (nn.MaxPool2d(3, 2, ceil_mode=True) if max_pool else
                nn.AvgPool2d(3, 2, ceil_mode=True, count_include_pad=False))

    s = side
    for _ in range(3):  # the three 3x3/2 ceil-mode pools (the 5x5 convolutions keep the size)
        s = -(-(s - 3) // 2) + 1
    norm = [nn.LocalResponseNorm(3, alpha=5e-5, beta=0.75, k=1.0)] if lrn else []
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, padding=2), pool(True), nn.ReLU(inplace=True), *norm,
        nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(inplace=True), pool(False),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(inplace=True), pool(False),
        nn.Flatten(), nn.Linear(64 * s * s, 64), nn.Linear(64, classes))


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


def vgg16(channels=3, side=224, classes=1000, batch_norm=False, dropout=0.5):
    """torchvision's VGG-16 (configuration D; 138,357,544 parameters at 224x224 and 1000 classes)
    without its adaptive pool: as dtrain's zoo, the classifier flattens whatever the features give
    (512 values at 32x32: 33,638,218 parameters at 10 classes); `batch_norm` adds batch norm after
    every convolution."""
    layers, inputs, s = [], channels, side
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            layers.append(nn.Conv2d(inputs, width, 3, padding=1))
            layers += [nn.BatchNorm2d(width)] if batch_norm else []
            layers.append(nn.ReLU(inplace=True))
            inputs = width
        layers.append(nn.MaxPool2d(2, 2))
        s //= 2
    return nn.Sequential(*layers, nn.Flatten(),
                         nn.Linear(512 * s * s, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         nn.Linear(4096, classes))


class ChannelPad(nn.Module):
    """The option-A shortcut of the CIFAR ResNets: x[:, :, ::stride, ::stride] with zero channels
    on both sides up to `planes` (the common PyTorch port's LambdaLayer)."""

    def __init__(self, inputs, planes, stride):
        super().__init__()
        self.stride, self.before = stride, (planes - inputs) // 2
        self.after = planes - inputs - self.before

    def forward(self, x):
        return nn.functional.pad(x[:, :, ::self.stride, ::self.stride],
                                 (0, 0, 0, 0, self.before, self.after))


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: conv3x3-bn-relu-conv3x3-bn + shortcut, relu. Where the
    shape changes the shortcut is a 1x1 projection with batch norm (option B, torchvision's) or,
    with shortcut="A", the parameter-free subsample-and-zero-pad of He et al.'s CIFAR ResNets."""

    def __init__(self, inputs, planes, stride, shortcut="B"):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if (stride != 1 or inputs != planes) and shortcut == "A":
            self.downsample = ChannelPad(inputs, planes, stride)
        elif stride != 1 or inputs != planes:
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


def resnet20(channels=3, classes=10, shortcut="A"):
    """He et al.'s CIFAR ResNet-20 (§4.2): conv 16@3x3-bn-relu, 3 stages of 3 basic blocks with
    16/32/64 channels (stride 2 at the start of stages 2 and 3), global average pool, fc; option-A
    shortcuts: 269,722 parameters at 10 classes (shortcut="B", 1x1 projections: 272,474)."""
    blocks, inputs = [], 16
    for stage in range(3):
        planes = 16 << stage
        for i in range(3):
            blocks.append(BasicBlock(inputs, planes, 2 if stage > 0 and i == 0 else 1, shortcut))
            inputs = planes
    return nn.Sequential(nn.Conv2d(channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                         nn.ReLU(inplace=True), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(64, classes))


def build(zoo, shape, classes):
    """The twin of dtrain's `model:` map `zoo` for samples of `shape` (C, H, W)."""
    name = zoo["name"]
    channels, side = shape[0], max(shape[1], shape[2])
    if name == "mlp":
        inputs = shape[0] * shape[1] * shape[2]
        return mlp(tuple(zoo.get("hidden", (500, 500))), inputs, classes)
    if name == "lenet":
        return lenet(channels, side, classes)
    if name == "cifar_cnn":
        return cifar_cnn(channels, side, classes, zoo.get("lrn", False))
    if name == "vgg16":
        return vgg16(channels, side, classes, zoo.get("batch_norm", False), zoo.get("dropout", 0.5))
    if name == "resnet20":
        return resnet20(channels, classes, zoo.get("shortcut", "A"))
    if name == "alexnet":
        return alexnet(channels, side, classes, zoo.get("lrn", False), zoo.get("dropout", 0.5))
    if name == "resnet18":
        small = zoo.get("small_input", "auto")
        return resnet18(channels, side, classes, None if small == "auto" else bool(small))
    raise ValueError(f"no PyTorch twin of dtrain's zoo model '{name}'")


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())
