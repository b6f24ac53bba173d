"""Reading back what a run wrote for TensorBoard."""

from __future__ import annotations

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def tensorboard_with_tensors(run_dir):
    """The run's TensorBoard events, every scalar and tensor (the HParams are tensors)."""
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events
