"""Demo training job: a small neural network learns scikit-learn's bundled digits.

Nothing is downloaded: the 8x8 digit images ship inside scikit-learn. Every step
logs the training loss; every few steps the validation loss and accuracy, through
the portal's metrics module (on PYTHONPATH in every portal job), and, where
TensorBoard is installed, as TensorBoard event files in ./tensorboard (TensorBoard's
own writer, no TensorFlow), for a TensorBoard session on this job.

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


class EventFiles:
    """Scalars as TensorBoard event files, written with TensorBoard's own writer."""

    def __init__(self, logdir: str) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.event, self.summary = Event, Summary
        self.writer = EventFileWriter(logdir)

    def scalars(self, step: int, **values: float) -> None:
        summary = self.summary(
            value=[self.summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()]
        )
        self.writer.add_event(self.event(wall_time=time.time(), step=step, summary=summary))

    def close(self) -> None:
        self.writer.close()


class NoEventFiles:
    def scalars(self, step: int, **values: float) -> None:
        pass

    def close(self) -> None:
        pass


def event_files(logdir: str) -> EventFiles | NoEventFiles:
    if not logdir:
        return NoEventFiles()
    try:
        return EventFiles(logdir)
    except ImportError:
        print("TensorBoard is not installed here: no event files")
        return NoEventFiles()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per step, to watch it")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--tensorboard", default="tensorboard", help="event files here ('' for none)"
    )
    args = parser.parse_args()
    board = event_files(args.tensorboard)

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
            board.scalars(step, loss=model.loss_)
            if step % args.eval_every == 0:
                proba = model.predict_proba(x_val)
                validation = {
                    "val_loss": log_loss(y_val, proba, labels=classes),
                    "val_accuracy": accuracy_score(y_val, classes[proba.argmax(axis=1)]),
                }
                pm.log(step=step, **validation)
                board.scalars(step, **validation)
            step += 1
            time.sleep(args.delay)
        accuracy = accuracy_score(y_val, model.predict(x_val))
        pm.log(step=step, epoch_val_accuracy=accuracy)
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {model.loss_:.4f}, val accuracy {accuracy:.3f}"
        )
    pm.close()
    board.close()


if __name__ == "__main__":
    main()
