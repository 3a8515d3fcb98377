"""Demo training job: a small neural network learns scikit-learn's bundled digits.

Nothing is downloaded: the 8x8 digit images ship inside scikit-learn. Every step
logs the training loss; every few steps the validation loss and accuracy, through
the portal's metrics module (on PYTHONPATH in every portal job), and, where
TensorBoard is installed, as TensorBoard event files in ./tensorboard (TensorBoard's
own writer, no TensorFlow), for a TensorBoard session on this job.

    train-digits --epochs 30 --delay 0.05

Resumable: it saves a checkpoint every ``--checkpoint-every`` steps and whenever the portal
asks (``pm.should_checkpoint()``, before a resumable job's time limit), then exits; run
again (the next attempt of a requeued job), it continues from the last checkpoint with the
same model, random state and batch order, so the result equals an uninterrupted run's
(the last line prints a digest of the weights to check that).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
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


CHECKPOINT = "train-digits.pkl"


def load_checkpoint() -> dict | None:
    """The last checkpoint (this job's earlier attempt), if pm.resume_step() knows one."""
    if pm.resume_step() is None:
        return None
    path = os.path.join(pm.checkpoint_dir(), CHECKPOINT)
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)  # noqa: S301 - the job's own file, written below
    except (OSError, pickle.UnpicklingError, EOFError):
        print("the checkpoint cannot be read: starting over")
        return None


def save_checkpoint(state: dict) -> None:
    """Written whole (a temporary file, then renamed), then announced to the portal."""
    path = os.path.join(pm.checkpoint_dir(), CHECKPOINT)
    with open(path + ".tmp", "wb") as fh:
        pickle.dump(state, fh)
    os.replace(path + ".tmp", path)
    pm.checkpoint_saved(state["step"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per step, to watch it")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-every", type=int, default=20, help="steps between checkpoints (0: none)"
    )
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
    state = load_checkpoint()
    if state is None:
        model = MLPClassifier(
            hidden_layer_sizes=(64,), learning_rate_init=0.01, random_state=args.seed
        )
        rng = np.random.default_rng(args.seed)
        step, epoch, order, position = 0, 0, None, 0
    else:
        model, rng = state["model"], np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        step, epoch, order, position = (state[k] for k in ("step", "epoch", "order", "position"))
        print(
            f"resuming from the checkpoint of step {step} (epoch {epoch + 1}), attempt {pm.attempt()}"
        )

    def save() -> None:
        save_checkpoint(
            {
                "model": model,
                "rng": rng.bit_generator.state,
                "step": step,
                "epoch": epoch,
                "order": order,
                "position": position,
            }
        )

    while epoch < args.epochs:
        if order is None:
            order, position = rng.permutation(len(x_train)), 0
        while position < len(order):
            batch = order[position : position + args.batch_size]
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
            position += args.batch_size
            if pm.should_checkpoint():
                save()
                print(f"checkpoint of step {step} saved on request; exiting to be requeued")
                pm.close()
                board.close()
                return
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                save()
            time.sleep(args.delay)
        accuracy = accuracy_score(y_val, model.predict(x_val))
        pm.log(step=step, epoch_val_accuracy=accuracy)
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {model.loss_:.4f}, val accuracy {accuracy:.3f}"
        )
        epoch, order = epoch + 1, None
    weights = b"".join(w.tobytes() for w in model.coefs_ + model.intercepts_)
    print(
        f"final val accuracy {accuracy_score(y_val, model.predict(x_val)):.4f}, "
        f"weights sha256 {hashlib.sha256(weights).hexdigest()[:16]}, steps {step}"
    )
    pm.close()
    board.close()


if __name__ == "__main__":
    main()
