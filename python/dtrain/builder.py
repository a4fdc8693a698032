"""Sequential: writes a model file's text (docs/MODEL_FILES.md) for a
sequential network, layer by layer:

    net = (dtrain.Sequential((1, 28, 28), batch=64, learning_rate=0.01, momentum=0.9)
           .conv(32, 5, pad=1).maxpool(2).dense(128).dense(10, activation="linear").softmax())
    model = net.build()          # a dtrain.Model; net.text() is the file's text

Keys are the model file's (Darknet's), written as given: any [net] key as
a keyword of Sequential, any layer key as a keyword of add() or of the
shortcuts. Nothing is checked here: the library's parser says what is
wrong, naming the line (dtrain.ConfigError)."""


def _val(v):
    if v is True:
        return "1"
    if v is False:
        return "0"
    if isinstance(v, (list, tuple)):
        return ",".join(str(e) for e in v)
    return str(v)


class Sequential:
    def __init__(self, input_shape, **net):
        if len(input_shape) == 2:
            input_shape = (1,) + tuple(input_shape)
        if len(input_shape) != 3:
            from .errors import UsageError
            raise UsageError(f"Sequential: input_shape (C, H, W) or (H, W), not {input_shape!r}")
        c, h, w = input_shape
        self.net = {"channels": c, "height": h, "width": w}
        self.net.update(net)
        self.sections = []

    def add(self, kind, **keys):
        """A section [kind] with its keys, e.g. add("lrn", size=5)."""
        self.sections.append((kind, keys))
        return self

    def conv(self, filters, size, stride=1, pad=1, activation="relu", **keys):
        """[convolutional]: pad=1 is Darknet's flag (size // 2 pixels a side);
        padding=N pixels instead with pad=0."""
        return self.add("convolutional", filters=filters, size=size, stride=stride, pad=pad, activation=activation,
                        **keys)

    def maxpool(self, size=2, stride=None, **keys):
        return self.add("maxpool", size=size, stride=size if stride is None else stride, **keys)

    def avgpool(self, **keys):
        return self.add("avgpool", **keys)

    def dense(self, output, activation="relu", **keys):
        """[connected] (activation is written always: Darknet's default is logistic)."""
        return self.add("connected", output=output, activation=activation, **keys)

    connected = dense

    def dropout(self, probability=0.5, **keys):
        return self.add("dropout", probability=probability, **keys)

    def batchnorm(self, **keys):
        return self.add("batchnorm", **keys)

    def activation(self, activation="relu"):
        return self.add("activation", activation=activation)

    def softmax(self, **keys):
        return self.add("softmax", **keys)

    def text(self):
        """The model file's text."""
        lines = ["[net]"] + [f"{k}={_val(v)}" for k, v in self.net.items()]
        for kind, keys in self.sections:
            lines += ["", f"[{kind}]"] + [f"{k}={_val(v)}" for k, v in keys.items()]
        return "\n".join(lines) + "\n"

    def save(self, path):
        """Writes the model file."""
        with open(path, "w") as f:
            f.write(self.text())
        return path

    def build(self, weights=None):
        """A dtrain.Model of this text."""
        from .model import Model
        return Model(self.text(), weights=weights)

    __str__ = text
