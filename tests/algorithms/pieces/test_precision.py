"""``run.precision``: bf16 autocast in the forward passes of training and evaluation, weights and losses in float32."""

import pytest
import torch
from torch import nn

from fedprior.algorithms.base import ClientInfo, RoundInfo, Runtime, Task
from fedprior.algorithms.pieces.local_training import train_epochs
from fedprior.algorithms.pieces.precision import autocast, float32
from fedprior.algorithms.registry import algorithm_spec
from fedprior.errors import ConfigError
from fedprior.experiments.config import validate_config
from fedprior.experiments.resume_check import changes_that_matter
from tests.support.toy_data import toy_images

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4, pixel_mean=(0.0,), pixel_std=(1.0,))
INFO = RoundInfo(seed=0, stage="federated", round=1)


class Layers:
    """The output dtypes of every convolution and linear layer that runs while recording (a global forward hook)."""

    def __init__(self) -> None:
        self.dtypes: list[tuple[str, bool, torch.dtype]] = []

    def __enter__(self) -> "Layers":
        def hook(module, inputs, output):
            if isinstance(module, (nn.Conv2d, nn.Linear)) and isinstance(output, torch.Tensor):
                self.dtypes.append((type(module).__name__, module.training, output.dtype))

        self.handle = nn.modules.module.register_module_forward_hook(hook)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()

    def seen(self, training: bool) -> set[torch.dtype]:
        return {dtype for _, mode, dtype in self.dtypes if mode == training}


def test_the_helper_is_bf16_autocast_on_the_device_type_or_nothing():
    x, w = torch.ones(2, 3), torch.ones(4, 3)
    with autocast(torch.device("cpu"), "bf16"):
        assert torch.nn.functional.linear(x, w).dtype == torch.bfloat16
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast("cpu", "fp32"):
        assert torch.nn.functional.linear(x, w).dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
    assert float32(torch.ones(1, dtype=torch.bfloat16)).dtype == torch.float32
    assert float32(torch.ones(1, dtype=torch.long)).dtype == torch.long
    with pytest.raises(ValueError, match="unknown precision 'fp16'; accepted: fp32, bf16"):
        autocast("cpu", "fp16")


@pytest.mark.parametrize("precision, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_a_training_step_computes_layers_in_the_precision_and_keeps_weights_gradients_and_loss_float32(precision, dtype):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(72, 3))
    data = toy_images(8)
    losses = []

    def loss_fn(m, x, y):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        losses.append(loss)
        return loss

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with Layers() as layers:
        train_epochs(
            model, data["x"], data["y"], epochs=1, batch_size=8, optimizer=optimizer, generator=torch.Generator(), loss_fn=loss_fn, precision=precision
        )
    assert [d for _, _, d in layers.dtypes] == [dtype, dtype]  # the convolution and the linear layer of the one step
    assert losses[0].dtype == torch.float32  # cross-entropy runs in float32 under autocast
    assert all(p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())
    assert all(s["momentum_buffer"].dtype == torch.float32 for s in optimizer.state.values())


@pytest.mark.parametrize(
    "name, values, data",
    [
        ("fedavg", {"model": "cnn"}, toy_images(16)),
        ("feddyn", {"model": "convnet-small"}, toy_images(16)),  # FedBM's baselines (with_shared(BODY_TRAINING))
        ("fixmatch", {"model": "convnet", "width": 4}, None),  # the semi-supervised family (FedDB's)
    ],
)
def test_bf16_reaches_the_layers_of_a_client_update_and_the_evaluation_and_replies_stay_float32(name, values, data):
    if data is None:
        labeled, unlabeled = toy_images(8, seed=1), toy_images(16, seed=2)
        data = {"x_labeled": labeled["x"], "y_labeled": labeled["y"], "x_unlabeled": unlabeled["x"], "y_unlabeled": unlabeled["y"]}
    spec = algorithm_spec(name)
    found = {}
    for precision in ("fp32", "bf16"):
        algorithm = spec.build(TASK, values, Runtime(1, 8, precision=precision))
        state = algorithm.init(INFO)
        with Layers() as layers:
            reply, _ = algorithm.client_update(algorithm.broadcast(state, INFO), {}, data, ClientInfo(0, "federated", 1, client_id=0))
            metrics = algorithm.evaluate(state, toy_images(20, seed=3))
        assert all(v.dtype == torch.float32 for k, v in reply.arrays.items() if v.is_floating_point())
        found[precision] = (layers.seen(training=True), layers.seen(training=False), metrics["accuracy"])
    assert found["fp32"][:2] == ({torch.float32}, {torch.float32})
    assert found["bf16"][:2] == ({torch.bfloat16}, {torch.bfloat16})
    assert 0.0 <= found["bf16"][2] <= 1.0


def test_bf16_for_an_algorithm_that_does_not_take_precision_is_refused_by_name():
    with pytest.raises(ConfigError, match="run.precision: algorithm 'fedsimclr' trains and evaluates in fp32 only.*bf16 for: fedavg"):
        algorithm_spec("fedsimclr").build(TASK, {}, Runtime(1, 8, precision="bf16"))
    algorithm_spec("fedsimclr").build(TASK, {}, Runtime(1, 8, precision="fp32"))
    with pytest.raises(ConfigError, match="model = 'linear' trains batched heads on features in fp32 only"):
        algorithm_spec("fedavg").build(Task(3, (5,), ("a", "b", "c"), 2), {"model": "linear"}, Runtime(1, 8, precision="bf16"))


def test_run_section_fields_are_checked_and_an_older_checkpoint_without_them_still_resumes():
    config = validate_config({"run": {"precision": "bf16", "checkpoint_every": 5}})
    assert config.run.precision == "bf16" and config.run.checkpoint_every == 5
    with pytest.raises(ConfigError, match="run.precision"):
        validate_config({"run": {"precision": "fp16"}})
    with pytest.raises(ConfigError, match="run.checkpoint_every"):
        validate_config({"run": {"checkpoint_every": 0}})
    now = validate_config({}).to_dict()
    older = {**now, "run": {k: v for k, v in now["run"].items() if k not in ("precision", "checkpoint_every")}}
    assert changes_that_matter(older, now) == {}  # recorded before the fields existed: they ran at the defaults
    assert set(changes_that_matter(older, validate_config({"run": {"precision": "bf16"}}).to_dict())) == {"run.precision"}
    assert changes_that_matter(now, validate_config({"run": {"checkpoint_every": 7}}).to_dict()) == {}  # the cadence may change on resume


def test_resident_models_are_channels_last_on_cuda_and_keep_the_layout_when_they_receive_a_broadcast(monkeypatch):
    from fedprior.algorithms.engines import supervised
    from fedprior.models import build_model

    rgb = Task(num_classes=3, input_shape=(3, 8, 8), class_names=("a", "b", "c"), num_clients=4)  # 3 channels: one would be both layouts at once

    def convolution_layouts(model: nn.Module) -> set[bool]:
        return {p.is_contiguous(memory_format=torch.channels_last) for p in model.parameters() if p.ndim == 4}

    on_cuda = supervised.cuda_layout(build_model("cnn", rgb), torch.device("cuda"))  # the layout needs no GPU, only the device's type
    assert convolution_layouts(on_cuda) == {True}
    assert convolution_layouts(supervised.cuda_layout(build_model("cnn", rgb), torch.device("cpu"))) == {False}  # the CPU's numbers unchanged
    net = supervised.GlobalModel(lambda: build_model("cnn", rgb), device=torch.device("cuda"))
    monkeypatch.setattr(supervised.GlobalModel, "load", lambda self, arrays: supervised.load_model_arrays(self.build(), arrays))  # stays on the CPU
    state = net.init(INFO)
    first = net.receive(state)
    again = net.receive({k: v + 1 for k, v in state.items()})
    assert again is first and convolution_layouts(again) == {True}  # copy_ keeps the layout
    assert torch.equal(again.state_dict()["features.0.weight"], state["model.features.0.weight"] + 1)


@pytest.mark.parametrize("norm", ["bn-batch", "bn"])
def test_channels_last_gives_the_contiguous_layouts_numbers_for_the_wrn(norm):
    """cuda_layout keeps FedDB's WRN-28-2 channels-last on CUDA (issue 43 item 2): the layout changes the kernels' summation
    order, not the numbers beyond float32 rounding. Checked on the CPU (oneDNN has both layouts): logits, every gradient
    and the batch-norm statistics of a training step, channels-last weights and images against contiguous ones. Two torch
    threads, as this project's machines run: on one, oneDNN sums the 3-channel stem's channels-last weight gradient in
    another order, and elements that cancel differ by up to 1.7e-3 of the gradient's largest (measured)."""
    from fedprior.models import build_model
    from fedprior.runtime.threads import torch_threads

    with torch_threads(2):
        _compare_wrn_layouts(norm, build_model)


def _compare_wrn_layouts(norm, build_model):

    rgb = Task(num_classes=10, input_shape=(3, 32, 32), class_names=tuple("abcdefghij"), num_clients=1)
    torch.manual_seed(0)
    contiguous = build_model("wrn28-2", rgb, norm=norm)
    last = build_model("wrn28-2", rgb, norm=norm)
    last.load_state_dict(contiguous.state_dict())
    last.to(memory_format=torch.channels_last)
    x, y = torch.randn(6, 3, 32, 32), torch.randint(0, 10, (6,))
    outputs = []
    for model, images in ((contiguous, x), (last, x.contiguous(memory_format=torch.channels_last))):
        logits = model(images)
        nn.functional.cross_entropy(logits, y).backward()
        outputs.append((logits, {n: p.grad for n, p in model.named_parameters()}, {n: b.clone() for n, b in model.named_buffers()}))
    assert any(p.grad.is_contiguous(memory_format=torch.channels_last) and not p.grad.is_contiguous() for p in last.parameters() if p.ndim == 4)
    torch.testing.assert_close(outputs[1][0], outputs[0][0], rtol=1e-4, atol=1e-5)
    for name, grad in outputs[0][1].items():
        torch.testing.assert_close(outputs[1][1][name], grad, rtol=1e-3, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
    for name, buffer in outputs[0][2].items():
        torch.testing.assert_close(outputs[1][2][name], buffer, rtol=1e-4, atol=1e-6)
