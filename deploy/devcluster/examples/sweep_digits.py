"""Sweep demo: an MLP with dropout and an L2 penalty learns scikit-learn's bundled digits,
one cross-validation fold per job.

Nothing is downloaded: the 8x8 digit images ship inside scikit-learn. The parameters
come from the portal's experiment (``pm.params()``: the trial's params.json) or from the
command line (``--lr=0.01 …``, which an experiment with ``pass_arguments: true`` appends);
the fold from FOLD/NUM_FOLDS (stratified K-fold over the whole data set; without them a
fixed 25 % validation split). Every epoch logs loss, val_loss and val_accuracy at
step = epoch, the same steps in every trial, so early stopping compares like with like.

    sweep-digits --epochs 20 --lr 0.05 --hidden 64 --dropout 0.2 --l2 1e-4
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import portal_metrics as pm
from sklearn.datasets import load_digits
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler


def split(fold: int, folds: int, seed: int):
    x, y = load_digits(return_X_y=True)
    if folds > 1:
        splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(x, y)
        train, val = list(splits)[fold]
        x_train, x_val, y_train, y_val = x[train], x[val], y[train], y[val]
    else:
        x_train, x_val, y_train, y_val = train_test_split(
            x, y, test_size=0.25, random_state=seed, stratify=y
        )
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_val), y_train, y_val


def softmax(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--l2", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per epoch, to watch")
    parser.set_defaults(**pm.params())  # the trial's parameters; the command line wins
    args = parser.parse_args()
    fold, folds = pm.fold()
    print(
        f"fold {fold + 1}/{folds}: lr={args.lr:g} hidden={args.hidden} "
        f"dropout={args.dropout:g} l2={args.l2:g}",
        flush=True,
    )
    x_train, x_val, y_train, y_val = split(fold, folds, args.seed)
    rng = np.random.default_rng(args.seed)
    hidden = int(args.hidden)
    w1 = rng.normal(0, np.sqrt(2 / 64), (64, hidden))
    b1 = np.zeros(hidden)
    w2 = rng.normal(0, np.sqrt(2 / hidden), (hidden, 10))
    b2 = np.zeros(10)
    keep = 1.0 - float(args.dropout)
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))
        losses = []
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            x, y = x_train[batch], y_train[batch]
            h = np.maximum(x @ w1 + b1, 0)
            mask = (rng.random(h.shape) < keep) / keep  # inverted dropout
            h = h * mask
            p = softmax(h @ w2 + b2)
            losses.append(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
            d = p.copy()
            d[np.arange(len(y)), y] -= 1
            d /= len(y)
            g_w2, g_b2 = h.T @ d + args.l2 * w2, d.sum(axis=0)
            dh = (d @ w2.T) * (h > 0) * mask
            g_w1, g_b1 = x.T @ dh + args.l2 * w1, dh.sum(axis=0)
            for param, grad in ((w1, g_w1), (b1, g_b1), (w2, g_w2), (b2, g_b2)):
                param -= args.lr * grad
        p_val = softmax(np.maximum(x_val @ w1 + b1, 0) @ w2 + b2)
        val_loss = float(-np.log(p_val[np.arange(len(y_val)), y_val] + 1e-12).mean())
        val_accuracy = float((p_val.argmax(axis=1) == y_val).mean())
        pm.log(
            step=epoch, loss=float(np.mean(losses)), val_loss=val_loss, val_accuracy=val_accuracy
        )
        print(f"epoch {epoch}: val_loss {val_loss:.4f} val_accuracy {val_accuracy:.4f}", flush=True)
        time.sleep(args.delay)
    pm.close()


if __name__ == "__main__":
    main()
