"""Demo training job: a small neural network learns scikit-learn's bundled digits.

Nothing is downloaded: the 8x8 digit images ship inside scikit-learn. Every step
logs the training loss; every few steps the validation loss and accuracy, through
the portal's metrics module (on PYTHONPATH in every portal job).

    train-digits --epochs 30 --delay 0.05
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import portal_metrics as pm
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per step, to watch it")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=0.25, random_state=args.seed, stratify=y
    )
    scaler = StandardScaler().fit(x_train)
    x_train, x_val = scaler.transform(x_train), scaler.transform(x_val)
    classes = np.unique(y)
    model = MLPClassifier(hidden_layer_sizes=(64,), learning_rate_init=0.01, random_state=args.seed)
    rng = np.random.default_rng(args.seed)

    step = 0
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            model.partial_fit(x_train[batch], y_train[batch], classes=classes)
            pm.log(step=step, loss=model.loss_)
            if step % args.eval_every == 0:
                proba = model.predict_proba(x_val)
                pm.log(
                    step=step,
                    val_loss=log_loss(y_val, proba, labels=classes),
                    val_accuracy=accuracy_score(y_val, classes[proba.argmax(axis=1)]),
                )
            step += 1
            time.sleep(args.delay)
        accuracy = accuracy_score(y_val, model.predict(x_val))
        pm.log(step=step, epoch_val_accuracy=accuracy)
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {model.loss_:.4f}, val accuracy {accuracy:.3f}"
        )
    pm.close()


if __name__ == "__main__":
    main()
