"""A model ending in Darknet's hierarchical softmax ([softmax] tree=) from
Python: fit from arrays, then predict gives the leaves' probabilities
(inner nodes 0, each row summing to 1, as Darknet's hierarchy_predictions
gives them) and its top-1 is what evaluate counts as correct."""
import numpy as np

import dtrain

# Two roots (mammal, bird) and four leaves: cat, dog, cow under mammal, owl under bird.
TREE = "mammal -1\nbird -1\ncat 0\ndog 0\ncow 0\nowl 1\n"
LEAVES = [2, 3, 4, 5]


def images(n, seed):
    """(n, 1, 4, 4) uint8 noise with a bright quadrant that tells the leaf; labels the leaf's node."""
    rng = np.random.default_rng(seed)
    y = rng.choice(LEAVES, size=n).astype(np.int32)
    x = rng.integers(0, 60, size=(n, 1, 4, 4), dtype=np.uint8)
    for i, leaf in enumerate(y):
        q = leaf - 2
        x[i, 0, 2 * (q // 2):2 * (q // 2) + 2, 2 * (q % 2):2 * (q % 2) + 2] += 180
    return x, y


def test_tree_fit_predict_evaluate(tmp_path):
    tree = tmp_path / "t.tree"
    tree.write_text(TREE)
    m = dtrain.Model(f"[net]\nchannels=1\nheight=4\nwidth=4\nbatch=16\nlearning_rate=0.1\nmomentum=0.9\n"
                     f"epochs=30\npolicy=constant\n[connected]\noutput=6\nactivation=linear\n"
                     f"[softmax]\ntree={tree}\n")
    x, y = images(256, 1)
    xt, yt = images(128, 2)
    m.fit(x, y, threads=1, verbose=False)
    p = m.predict(xt)
    assert p.shape == (128, 6) and p.dtype == np.float32
    assert np.all(p[:, :2] == 0), "inner nodes are not predicted"
    assert np.all(p >= 0) and np.allclose(p.sum(axis=1), 1, atol=1e-5), "the leaves' probabilities sum to 1"
    top1 = np.argmax(p, axis=1)
    acc = float(np.mean(top1 == yt))
    assert acc >= 0.9, f"learns the four leaves: {acc}"
    r = m.evaluate(xt, yt)
    assert abs(r["accuracy"] - acc) < 1e-6, (r, acc)
